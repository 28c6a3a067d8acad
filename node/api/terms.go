package api

import (
	"encoding/json"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/wire"
)

// submitTerms is wire.Terms under the local API's JSON names, which
// SubmitRequest had before its terms were a wire.Terms: clients and the
// dashboard send them. It has wire.Terms's fields, in order and of the
// same types, so that each converts to the other (conversions ignore tags)
// and the compiler keeps them alike.
type submitTerms struct {
	Module     blob.Digest     `json:"module"`
	ModuleSize int64           `json:"module_size"`
	Input      blob.Digest     `json:"input"`
	InputSize  int64           `json:"input_size"`
	Memory     uint64          `json:"memory,omitempty"`
	TimeoutMS  int64           `json:"timeout_ms,omitempty"`
	Fuel       uint64          `json:"fuel,omitempty"`
	Mode       uint8           `json:"mode,omitempty"`
	MaxOutput  int64           `json:"max_output,omitempty"`
	Rtol       float64         `json:"rtol,omitempty"`
	Atol       float64         `json:"atol,omitempty"`
	Format     uint8           `json:"format,omitempty"`
	Proofs     bool            `json:"proofs,omitempty"`
	Args       []string        `json:"args,omitempty"`
	Shard      uint32          `json:"-"`
	Shards     uint32          `json:"-"`
	Data       []wire.DataBlob `json:"data,omitempty"`
	Precision  string          `json:"precision,omitempty"`
}

// submitFields is SubmitRequest without its JSON methods: its tagged
// fields, and its Terms left out (json:"-").
type submitFields SubmitRequest

// submitJSON is a SubmitRequest as its JSON reads: the terms' fields and
// the others side by side.
type submitJSON struct {
	submitTerms
	submitFields
}

// MarshalJSON implements json.Marshaler: the terms under submitTerms's
// names, the other fields under their tags.
func (r SubmitRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(submitJSON{submitTerms(r.Terms), submitFields(r)})
}

// UnmarshalJSON implements json.Unmarshaler, reading what MarshalJSON
// writes.
func (r *SubmitRequest) UnmarshalJSON(b []byte) error {
	v := submitJSON{submitTerms(r.Terms), submitFields(*r)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = SubmitRequest(v.submitFields)
	r.Terms = wire.Terms(v.submitTerms)
	return nil
}

// CheckRequirement reports whether a requirement expression compiles, as
// the node compiles it.
func CheckRequirement(expr string) error {
	_, err := requirement.Compile(expr)
	return err
}
