package api

import "github.com/infernet/infernet/node/openai"

// OpenAIConfig is the terms of the jobs of the API's OpenAI endpoints
// (Options.OpenAI).
type OpenAIConfig = openai.Config

// DefaultOpenAIConfig is the terms the OpenAI endpoints use for fields
// left zero.
func DefaultOpenAIConfig() OpenAIConfig { return openai.DefaultConfig() }

// How the OpenAI endpoints verify a completion (OpenAIConfig.Verify), and
// the determinism modes of their jobs (OpenAIConfig.Mode).
const (
	OpenAIVerifyReplicas = openai.VerifyReplicas
	OpenAIVerifyPrefill  = openai.VerifyPrefill
	OpenAIModeExact      = openai.ModeExact
	OpenAIModeTolerance  = openai.ModeTolerance
)
