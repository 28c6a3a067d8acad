package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"math/bits"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/blob/blobnet"
	"github.com/infernet/infernet/node/challenge"
	"github.com/infernet/infernet/node/gossip"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/proofs/fair"
	"github.com/infernet/infernet/proofs/gemmproof"
	"github.com/infernet/infernet/proofs/keys"
)

// The documents (README.md and docs/*.md) state figures that the code
// decides: defaults, caps, thresholds, versions. The tests below read each
// figure out of the prose and compare it with the code, so that a document
// and the code cannot drift apart silently (the README once said trust
// after 10 agreements and 20 % spot checks where the code had 20 and 15 %).
// A figure that moved in the code fails here: fix the document, or the code.

// docRoot is the repository root, seen from this package.
const docRoot = ".."

// docSize is a byte count, written in the documents as "64 MiB".
type docSize int64

func (s docSize) String() string {
	for _, u := range []struct {
		unit  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if s >= 1<<u.shift && s%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", s>>u.shift, u.unit)
		}
	}
	return fmt.Sprintf("%d bytes", int64(s))
}

// docAll makes a document's figure equal every one of several code values
// (a node default and the CLI flag that sets it, say).
type docAll []any

// docFigure is one figure: in file, every match of pattern must have its
// groups equal want, one value per group, and there must be a match.
type docFigure struct {
	file    string
	pattern string
	want    []any
}

// TestDocsConstants checks the figures of README.md and docs/ against the
// code's constants and defaults.
func TestDocsConstants(t *testing.T) {
	cfg := DefaultConfig()
	cfg.setDefaults()
	var spec Spec
	spec.setDefaults()
	rep := reputation.Defaults
	cli := docCLISource(t)
	flag := func(cmd, name string) any { return cli.flagDefault(t, cmd, name) }
	cliConst := func(name string) any { return cli.constant(t, name) }
	meter := docFileConsts(t, "host/internal/meter/meter.go", "MaxFunctions", "MaxCodeBytes", "MaxFunctionBytes", "MaxNesting")
	mnist := docFileConsts(t, "testdata/jobs/mnist/main.go", "pixels", "hidden", "classes")
	chargpt := docFileConsts(t, "testdata/jobs/chargpt/main.go", "nLayer", "nHead", "dModel", "ctxLen")
	gossipDefaults := docAssignedDefaults(t, "node/gossip/gossip.go", "cfg.MaxSkew", "cfg.QueueSize")
	capacity := docFairCapacity(t, 256)
	constraints, domains := docCircuitSizes(t, "gemm-64", "committed-gemm-16", "committed-gemm-32", "exchange-256")
	proofTemplates, gemmTemplates := ProofTemplates(), gemmproof.Templates()
	listenPort := docPortOf(t, DefaultConfig().Listen[0])
	dashboard := docFileConsts(t, "node/api/dashboard.go", "loginTTL", "sessionTTL")
	local := docFileConsts(t, "cmd/infernet/internal/cli/local.go", "providerWait")
	f32Rtol, f32Atol := tensor.F32.Tolerance()
	tf32Rtol, tf32Atol := tensor.TF32.Tolerance()
	bf16Rtol, bf16Atol := tensor.BF16.Tolerance()

	checks := []docFigure{
		// README.md
		{"README.md", `A job runs on (\d+) distinct providers by default`, []any{docAll{spec.Replicas, flag("NewCmdSubmit", "replicas")}}},
		{"README.md", `\(a (\w+) lie gets a provider banned\)`, []any{docOrdinal(t, rep.MaxLies)}},
		{"README.md", `On Debian or Ubuntu with Go (\d+\.\d+)`, []any{docGoVersion(t)}},
		{"README.md", `the wazero CLI (v[\d.]+)`, []any{docAll{docShellVar(t, "scripts/deps.sh", "wazero_version"), docGoModVersion(t, "github.com/tetratelabs/wazero")}}},
		{"README.md", `Exit status: (\d+) for a verified result,\s+(\d+) for an unverified one \(\x60--replicas 1\x60\), (\d+) for no result, (\d+) when every replica agrees`,
			[]any{cliConst("ExitOK"), cliConst("ExitUnverified"), cliConst("ExitNoResult"), cliConst("ExitNotRun")}},
		{"README.md", `784-(\d+)-10 MLP`, []any{mnist["hidden"]}},

		// docs/cli.md
		{"docs/cli.md", "Defaults: `--timeout` (\\d+ s), `--memory` (\\d+ MiB), `--max-output` (\\d+ MiB), `--mode (\\w+)`",
			[]any{docAll{host.DefaultTimeout, flag("NewCmdRun", "timeout")}, docAll{docSize(host.DefaultMemoryLimit), flag("NewCmdRun", "memory")},
				docAll{docSize(host.DefaultMaxOutput), flag("NewCmdRun", "max-output")}, flag("NewCmdRun", "mode")}},
		{"docs/cli.md", "\\*\\*(\\d+)\\*\\* when it could not run", []any{cliConst("ExitNotRun")}},
		{"docs/cli.md", "above (\\d+): (\\d+)", []any{cliConst("maxExitCode"), cliConst("maxExitCode")}},
		{"docs/cli.md", "\\| `--listen` \\| TCP and QUIC on port (\\d+) \\|", []any{listenPort}},
		{"docs/cli.md", "\\| `--api` \\| `([^`]+)` \\|", []any{flag("NewCmdNode", "api")}},
		{"docs/cli.md", "\\| `--max-memory` \\| (\\d+ GiB) \\|", []any{docAll{docSize(cfg.MaxMemory), flag("NewCmdNode", "max-memory")}}},
		{"docs/cli.md", "\\| `--max-output` \\| (\\d+ MiB) \\|", []any{docAll{docSize(cfg.MaxOutput), flag("NewCmdNode", "max-output")}}},
		{"docs/cli.md", "\\| `--max-module` \\| (\\d+ MiB) \\|", []any{docAll{docSize(cfg.MaxModule), flag("NewCmdNode", "max-module")}}},
		{"docs/cli.md", "\\| `--max-input` \\| (\\d+ MiB) \\|", []any{docAll{docSize(cfg.MaxInput), flag("NewCmdNode", "max-input")}}},
		{"docs/cli.md", "\\| `--max-data` \\| (\\d+ GiB) \\|", []any{docAll{docSize(cfg.MaxData), flag("NewCmdNode", "max-data")}}},
		{"docs/cli.md", "\\| `--blob-quota` \\| (\\d+ GiB) \\|", []any{docAll{docSize(cfg.BlobQuota), flag("NewCmdNode", "blob-quota")}}},
		{"docs/cli.md", "\\| `--model-cache` \\| (\\d+ GiB) \\|", []any{docAll{docSize(host.DefaultModelCache), flag("NewCmdNode", "model-cache")}}},
		{"docs/cli.md", "\\| `--max-timeout` \\| (\\d+ h) \\|", []any{docAll{cfg.MaxTimeout, flag("NewCmdNode", "max-timeout")}}},
		{"docs/cli.md", "\\| `--max-deadline` \\| (\\d+ h) \\|", []any{docAll{cfg.MaxDeadline, flag("NewCmdNode", "max-deadline")}}},
		{"docs/cli.md", "\\| `--aggregator`, `--fee` \\| off, (\\d+) % \\|", []any{flag("NewCmdNode", "fee")}},
		{"docs/cli.md", "\\| `--advert-interval` \\| (\\d+ min) \\|", []any{cfg.AdvertInterval}},
		{"docs/cli.md", "\\| `--check-tie` \\| ([\\d.]+) \\| near-tie bound, in logits \\(0 to (\\d+);", []any{DefaultCheckTie, llama.MaxTie}},
		{"docs/cli.md", "\\| `--heartbeat` \\| (\\d+ s) \\|", []any{cfg.Heartbeat}},
		{"docs/cli.md", "\\| `--silence` \\| (\\d+ s) \\|", []any{cfg.Silence}},
		{"docs/cli.md", "Defaults: `--replicas` (\\d+) \\(at most (\\d+)\\), `--timeout` (\\d+ s) per run, `--deadline` (\\d+) × timeout \\+ (\\d+ s)\\s+for the whole job, `--memory` (\\d+ MiB), `--max-output` (\\d+ MiB), `--mode (\\w+)`",
			[]any{docAll{spec.Replicas, flag("NewCmdSubmit", "replicas")}, wire.MaxReplicas, docAll{spec.Timeout(), flag("NewCmdSubmit", "timeout")},
				docDeadlineFactor(), docDeadlineExtra(), docAll{docSize(spec.Memory), flag("NewCmdSubmit", "memory")}, docSize(spec.MaxOutput), flag("NewCmdSubmit", "mode")}},
		{"docs/cli.md", "\\| (\\d+) \\| an unverified result", []any{cliConst("ExitUnverified")}},
		{"docs/cli.md", "\\| (\\d+) \\| no result:", []any{cliConst("ExitNoResult")}},
		{"docs/cli.md", "\\| (\\d+) \\| every replica agrees", []any{cliConst("ExitNotRun")}},
		{"docs/cli.md", "\\| (\\d+) \\| any other error", []any{cliConst("ExitError")}},
		{"docs/cli.md", "`(cores, [^`]+)`", []any{requirement.Names}},
		{"docs/cli.md", `at most (\d+) bytes of text and (\d+) syntax nodes nested (\d+) deep`, []any{wire.MaxRequire, requirement.MaxNodes, requirement.MaxDepth}},

		{"docs/cli.md", "`--shards` shards \\(default (\\d+)\\) of MODULE", []any{flag("NewCmdTrain", "shards")}},
		{"docs/cli.md", `The link works once, within (\d+ min)utes; opening it starts a browser\s+session of (\d+ h)ours`,
			[]any{time.Duration(dashboard["loginTTL"]), time.Duration(dashboard["sessionTTL"])}},
		{"docs/cli.md", `It waits up to (\d+ s) to hear from \x60--replicas\x60 providers`, []any{time.Duration(local["providerWait"])}},
		{"docs/cli.md", "`--rounds` \\(default (\\d+)\\) sets how many", []any{flag("NewCmdTrain", "rounds")}},
		{"docs/cli.md", `Exit status: (\d+) when every round was verified, (\d+) when some ran on one replica only, (\d+) when a round failed`,
			[]any{cliConst("ExitOK"), cliConst("ExitUnverified"), cliConst("ExitNoResult")}},

		// docs/sandbox.md
		{"docs/sandbox.md", `\| memory \| (\d+ MiB) \|`, []any{docSize(host.DefaultMemoryLimit)}},
		{"docs/sandbox.md", `\| time \| (\d+ s) \|`, []any{host.DefaultTimeout}},
		{"docs/sandbox.md", `\| stdout \| (\d+ MiB) \|`, []any{docSize(host.DefaultMaxOutput)}},
		{"docs/sandbox.md", `\| stderr \| (\d+ MiB) \|`, []any{docSize(host.DefaultMaxStderr)}},
		{"docs/sandbox.md", `\| tables \| (\d{1,3}(?:,\d{3})+|\d+) elements \|`, []any{host.MaxTableElements}},
		{"docs/sandbox.md", `more\s+than (\d{1,3}(?:,\d{3})+|\d+) functions, (\d+ MiB) of code, (\d+ KiB) in one function, or control nesting deeper than\s+(\d{1,3}(?:,\d{3})+|\d+)`,
			[]any{meter["MaxFunctions"], docSize(meter["MaxCodeBytes"]), docSize(meter["MaxFunctionBytes"]), meter["MaxNesting"]}},

		// docs/tensor.md
		{"docs/tensor.md", "ABI v(\\d+) \\(`abi_version\\(\\)` answers (\\d+)\\)", []any{abi.Version, abi.Version}},
		{"docs/tensor.md", `Shapes have 1 to (\d+) dimensions`, []any{abi.MaxDims}},
		{"docs/tensor.md", `\(ε = ([\de.-]+),`, []any{abi.LayerNormEps}},
		{"docs/tensor.md", "`(\\w+)` \\(the default\\): every op runs on the reference kernel", []any{abi.ModeExact.String()}},

		// docs/network.md
		{"docs/network.md", `TCP and QUIC \(port (\d+) by default\)`, []any{listenPort}},
		{"docs/network.md", "\\*\\*JobAnnounce\\*\\* on `([^`]+)`", []any{gossip.TopicJobs}},
		{"docs/network.md", "\\*\\*CapabilityAdvert\\*\\* on `([^`]+)`", []any{gossip.TopicAdverts}},
		{"docs/network.md", `republished every (\d+ min)`, []any{cfg.AdvertInterval}},
		{"docs/network.md", `(\d+ MiB) per GossipSub RPC and (\d+ KiB) per message`, []any{docSize(wire.MaxGossipRPC), docSize(wire.MaxGossipMessage)}},
		{"docs/network.md", `a timestamp within ±(\d+ min) of the local clock`, []any{gossipDefaults["cfg.MaxSkew"]}},
		{"docs/network.md", `queues are (\d+) deep`, []any{gossipDefaults["cfg.QueueSize"]}},
		{"docs/network.md", `with the input\s+inline when it is at most (\d+ MiB)`, []any{docSize(wire.MaxInline)}},
		{"docs/network.md", `a heartbeat every (\d+ s)`, []any{cfg.Heartbeat}},
		{"docs/network.md", `takes bids\s+from any provider for (\d+ s)`, []any{bidWindow}},
		{"docs/network.md", `falls silent for (\d+ s)`, []any{cfg.Silence}},
		{"docs/network.md", `once (\d+) providers have\s+failed a replica`, []any{maxAttempts}},
		{"docs/network.md", `Blobs of (\d+ MiB) or more are fetched in (\d+ MiB) ranges from up to (\d+) sources`,
			[]any{docSize(blobnet.DefaultParallelThreshold), docSize(blobnet.DefaultChunkSize), blobnet.DefaultMaxSources}},
		{"docs/network.md", `removes blobs nothing has\s+used for (\d+ h)`, []any{cfg.BlobRetention}},
		{"docs/network.md", `file a shard\), at most (\d{1,3}(?:,\d{3})+|\d+) shards`, []any{wire.MaxShards}},
		{"docs/network.md", `submitted again, at most (\d+) jobs per shard`, []any{shardAttempts}},
		{"docs/network.md", `at most (\d+) data blobs, (\d+ GiB) in all; a provider mounts at most (\d+ GiB)`,
			[]any{wire.MaxData, docSize(wire.MaxDataBytes), docAll{docSize(cfg.MaxData), flag("NewCmdNode", "max-data")}}},
		{"docs/network.md", `\(default fee (\d+) %\)`, []any{flag("NewCmdNode", "fee")}},
		{"docs/network.md", `hands the job over \(at most (\d+) shards\)`, []any{MaxAggregateShards}},
		{"docs/network.md", "`--spot-check K` shards \\(default (\\d+)\\)", []any{flag("NewCmdSubmit", "spot-check")}},
		{"docs/network.md", "`--max-fee`\\s+\\(default (\\d+) %\\)", []any{flag("NewCmdSubmit", "max-fee")}},
		{"docs/network.md", "\\(`--max-memory`, (\\d+ GiB)\\)", []any{docAll{docSize(cfg.MaxMemory), flag("NewCmdNode", "max-memory")}}},
		{"docs/network.md", "\\(`--max-output`, (\\d+ MiB)\\)", []any{docAll{docSize(cfg.MaxOutput), flag("NewCmdNode", "max-output")}}},
		{"docs/network.md", "\\(`--max-module`, (\\d+ MiB);", []any{docAll{docSize(cfg.MaxModule), flag("NewCmdNode", "max-module")}}},
		{"docs/network.md", "`--max-input`, (\\d+ MiB)\\)", []any{docAll{docSize(cfg.MaxInput), flag("NewCmdNode", "max-input")}}},
		{"docs/network.md", "\\(`--max-timeout`, (\\d+ h)\\)", []any{docAll{cfg.MaxTimeout, flag("NewCmdNode", "max-timeout")}}},
		{"docs/network.md", "\\(`--max-deadline`, (\\d+ h)\\)", []any{docAll{cfg.MaxDeadline, flag("NewCmdNode", "max-deadline")}}},
		{"docs/network.md", "\\(`--blob-quota`, (\\d+ GiB)\\)", []any{docAll{docSize(cfg.BlobQuota), flag("NewCmdNode", "blob-quota")}}},
		{"docs/network.md", `A fetch must reach (\d+ KiB)/s after a (\d+ s) grace`, []any{docSize(blobnet.DefaultMinRate), blobnet.DefaultRateGrace}},
		{"docs/network.md", `ends after (\d+ s) \+ the time the size takes at (\d+ KiB)/s`, []any{fetchTime(0), docFetchRate(t)}},
		{"docs/network.md", `final CLTV delta is at most (\d+)\s+blocks and it stays payable for (\d+ s) or more`, []any{payments.MaxInvoiceCltv, payments.MinInvoiceValidity}},
		{"docs/network.md", "comparison, (\\d+ s) each \\(`FUZZTIME`\\)", []any{docFuzzTime(t)}},

		// docs/verification.md
		{"docs/verification.md", "\\(`--replicas`, default (\\d+), at most (\\d+)\\)", []any{docAll{spec.Replicas, flag("NewCmdSubmit", "replicas")}, wire.MaxReplicas}},
		{"docs/verification.md", "\\(`--rtol`, default ([\\de.-]+); `--atol`, default ([\\de.-]+);", []any{flag("NewCmdSubmit", "rtol"), flag("NewCmdSubmit", "atol")}},
		{"docs/verification.md", "\\| f32 \\| [^|]+ \\| ([\\de.-]+) \\| ([\\de.-]+) \\|", []any{docAll{f32Rtol, flag("NewCmdSubmit", "rtol")}, docAll{f32Atol, flag("NewCmdSubmit", "atol")}}},
		{"docs/verification.md", "\\| tf32 \\| [^|]+ \\| ([\\de.-]+) \\| ([\\de.-]+) \\|", []any{tf32Rtol, tf32Atol}},
		{"docs/verification.md", "\\| bf16 \\| [^|]+ \\| ([\\de.-]+) \\| ([\\de.-]+) \\|", []any{bf16Rtol, bf16Atol}},
		{"docs/verification.md", `and never more than (\d+)\)`, []any{wire.MaxReplicas}},
		{"docs/verification.md", `and have (\d+) agreed results in a row`, []any{rep.TrustStreak}},
		{"docs/verification.md", `until (\d+) of its results were\s+\*\*proven\*\*`, []any{rep.Probation}},
		{"docs/verification.md", `a newcomer's score is 1/(\d+) of what its conduct earns`, []any{rep.Probation + 1}},
		{"docs/verification.md", `never seen scores 1/(\d+)`, []any{rep.Probation + 1}},
		{"docs/verification.md", `banned at once, for (\d+ days)`, []any{rep.BanFor}},
		{"docs/verification.md", `at most (\d+ min)\s+whatever it declares`, []any{reputation.MaxAdvertInterval}},
		{"docs/verification.md", `never paid it: (\d+)\s+in (\d+ h)`, []any{strangerAllowance, strangerWindow}},
		{"docs/verification.md", `(\d+) % of such jobs are spot-checked`, []any{docPercent(cfg.SpotCheck)}},
		{"docs/verification.md", "--check-tie`, default ([\\d.]+) logits, at most (\\d+);", []any{DefaultCheckTie, llama.MaxTie}},
		{"docs/verification.md", `after (\d+) % of adaptive jobs`, []any{docPercent(cfg.Canary)}},
		{"docs/verification.md", `an outvoted result weighing (\d+) agreements`, []any{rep.LieWeight}},
		{"docs/verification.md", `All counts decay with a\s+(\d+-day) half-life`, []any{rep.HalfLife}},
		{"docs/verification.md", `A score under ([\d.]+) bans the peer for (\d+ days), and so does a (\w+) lie`,
			[]any{rep.BanBelow, rep.BanFor, docOrdinal(t, rep.MaxLies)}},

		// docs/payments.md
		{"docs/payments.md", `outputs of at most (\d+) bytes`, []any{capacity}},
		{"docs/payments.md", `a final CLTV delta of (\d+) blocks`, []any{payments.HoldCltv}},
		{"docs/payments.md", `at most (\d+) blocks and it stays payable for (\d+ s) or more`, []any{payments.MaxInvoiceCltv, payments.MinInvoiceValidity}},
		{"docs/payments.md", `run\s+at start and every (\d+ s)`, []any{cfg.PaymentSweep}},
		{"docs/payments.md", `past the job's deadline \+ (\d+ min)`, []any{payGrace}},
		{"docs/payments.md", `pinned btcd (v[\d.]+) and lnd (v[\d.]+-beta)`, []any{docShellVar(t, "scripts/regtest.sh", "BTCD_VERSION"), docShellVar(t, "scripts/regtest.sh", "LND_VERSION")}},
		{"docs/payments.md", `starts btcd and (\w+) lnd nodes on loopback \(([^)]*)\)`, docRegtestNodes(t)},

		// docs/proofs.md
		{"docs/proofs.md", `Groth16 on BN254 with gnark (v[\d.]+)`, []any{docGoModVersion(t, "github.com/consensys/gnark")}},
		{"docs/proofs.md", "\\| `gemm-64` \\| ([\\d,]+) \\|", []any{constraints["gemm-64"]}},
		{"docs/proofs.md", "\\| `committed-gemm-16` / `-32` \\| ([\\d,]+) / ([\\d,]+) \\|", []any{constraints["committed-gemm-16"], constraints["committed-gemm-32"]}},
		{"docs/proofs.md", "\\| `exchange-256` \\| ([\\d,]+) \\|", []any{constraints["exchange-256"]}},
		{"docs/proofs.md", "at\\s+2\\^(\\d+) \\(the domain of `committed-gemm-16` and `exchange-256`\\)", []any{docAll{domains["committed-gemm-16"], domains["exchange-256"]}}},
		{"docs/proofs.md", `the smallest CommittedGEMM template that holds it \((\d+), (\d+) or\s+(\d+)\)`, docAnys(gemmTemplates)},
		{"docs/proofs.md", `past a cap of (\d+)\s+proven ops`, []any{host.DefaultMaxProofs}},
		{"docs/proofs.md", `On the network \(.*?\) the templates are (\d+) and (\d+)\.`, docAnys(proofTemplates)},
		{"docs/proofs.md", "`committed-gemm-(\\d+)` and `committed-gemm-(\\d+)` turn proof mode on", docAnys(proofTemplates)},
		{"docs/proofs.md", `outputs of at most (\d+) bytes \(the\s+(\d+)-byte template less a (\d+)-byte length\)`, []any{capacity, 256, 256 - capacity}},
		{"docs/proofs.md", `An offer not bought by the job's deadline \+ (\d+ min)`, []any{payGrace}},

		// docs/workloads.md
		{"docs/workloads.md", `A (\d+)-(\d+)-(\d+) MLP`, []any{mnist["pixels"], mnist["hidden"], mnist["classes"]}},
		{"docs/workloads.md", "\\(`testdata/jobs/chargpt`: (\\d+) layers, (\\d+)\\s+heads, width (\\d+), context (\\d+)",
			[]any{chargpt["nLayer"], chargpt["nHead"], chargpt["dModel"], chargpt["ctxLen"]}},

		// docs/benchmarks.md
		{"docs/benchmarks.md", `\(fuel-metered, (\d+ s) limit\)`, []any{docBenchTimeout(t)}},
	}

	figures := 0
	for _, c := range checks {
		ms := regexp.MustCompile(c.pattern).FindAllSubmatch(docProse(t, c.file), -1)
		if len(ms) == 0 {
			t.Errorf("%s no longer says %q", c.file, c.pattern)
			continue
		}
		for _, m := range ms {
			if len(m)-1 != len(c.want) {
				t.Fatalf("%s: pattern %q has %d groups, %d wanted values", c.file, c.pattern, len(m)-1, len(c.want))
			}
			for i, w := range c.want {
				ws, ok := w.(docAll)
				if !ok {
					ws = docAll{w}
				}
				for _, w := range ws {
					if err := docSame(string(m[i+1]), w); err != nil {
						t.Errorf("%s: %q says %q, the code %v (%v)", c.file, m[0], m[i+1], w, err)
					}
				}
			}
		}
		figures += len(c.want)
	}

	// Figures that are behaviour rather than one constant.
	if m := regexp.MustCompile(`Beyond (\d+) \+ 1 in (\d+) of the results it paid for`).FindSubmatch(docProse(t, "docs/payments.md")); m == nil {
		t.Error("docs/payments.md no longer says how many unpaid results a client may have")
	} else {
		base, per := docAtoi(t, m[1]), docAtoi(t, m[2])
		for _, paid := range []int{0, 9, 10, 25, 100} {
			allowed := base + paid/per
			if owesTooMuch(allowed, paid) || !owesTooMuch(allowed+1, paid) {
				t.Errorf("docs/payments.md: a client that paid %d may leave %d unpaid, the code disagrees", paid, allowed)
			}
		}
		figures += 2
	}
	for _, file := range []string{"docs/cli.md", "docs/network.md"} {
		if !strings.Contains(string(docProse(t, file)), "slots + queue/2") {
			t.Errorf("%s no longer gives --max-per-client as slots + queue/2", file)
		}
	}
	for _, slots := range []int{1, 4, 16} {
		c := Config{Slots: slots}
		c.setDefaults()
		if c.MaxPerClient != c.Slots+c.Queue/2 {
			t.Errorf("--max-per-client defaults to %d with %d slots and a queue of %d, not slots + queue/2", c.MaxPerClient, c.Slots, c.Queue)
		}
	}
	figures++

	// The packages the README names are among those make deps installs.
	if m := regexp.MustCompile(`Debian packages \(([^)]*), \.\.\.\)`).FindSubmatch(docProse(t, "README.md")); m == nil {
		t.Error("README.md no longer names the Debian packages of make deps")
	} else {
		pm := regexp.MustCompile(`(?m)^packages=\(([^)]*)\)`).FindStringSubmatch(docRepoFile(t, "scripts/deps.sh"))
		if pm == nil {
			t.Fatal("scripts/deps.sh has no packages=(...)")
		}
		for _, p := range strings.Split(string(m[1]), ", ") {
			if !slices.Contains(strings.Fields(pm[1]), p) {
				t.Errorf("README.md names package %s, which scripts/deps.sh does not install", p)
			}
		}
	}
	figures++

	// The templates the documents list are the key store's.
	var names []string
	for _, tm := range keys.Templates() {
		names = append(names, tm.Name)
	}
	if m := regexp.MustCompile("Templates by name \\(`infernet ceremony templates`\\): ([^.]+)\\.").FindSubmatch(docProse(t, "docs/proofs.md")); m == nil {
		t.Error("docs/proofs.md no longer lists the templates")
	} else if got := docBackticked(string(m[1])); !slices.Equal(got, names) {
		t.Errorf("docs/proofs.md lists templates %v, the key store has %v", got, names)
	}
	figures++

	// The backend table of docs/tensor.md names every backend, and only those.
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\| ").FindAllSubmatch(docRead(t, "docs/tensor.md"), -1) {
		listed = append(listed, string(m[1]))
	}
	if want := strings.Split(backends.Names(), ", "); !slices.Equal(listed, want) {
		t.Errorf("docs/tensor.md lists backends %v, the code has %v", listed, want)
	}
	figures++
	t.Logf("%d figures in %d checks agree with the code", figures, len(checks)+4)
}

// TestDocsProtocols: every libp2p protocol or topic the documents name in
// backticks is one the code speaks, and each the code speaks is named.
func TestDocsProtocols(t *testing.T) {
	known := map[string]bool{"/infernet": true} // the DHT's protocol prefix
	for _, p := range []string{string(ProtocolBid), string(ProtocolAssign), string(ProtocolResult), string(ProtocolSettle),
		string(ProtocolAggregate), blobnet.ProtocolID, challenge.ID, gossip.TopicJobs, gossip.TopicAdverts} {
		known[p] = true
	}
	re := regexp.MustCompile("`(/infernet[^`]*)`")
	named := map[string]bool{}
	for _, file := range docFileList(t) {
		for _, m := range re.FindAllSubmatch(docRead(t, file), -1) {
			named[string(m[1])] = true
			if !known[string(m[1])] {
				t.Errorf("%s names protocol %s, which the code does not have", file, m[1])
			}
		}
	}
	for p := range known {
		if !named[p] {
			t.Errorf("no document names protocol %s", p)
		}
	}
}

// TestDocsExample: the README's worked example shows the job's real output,
// its real size and digest, and runs files that exist.
func TestDocsExample(t *testing.T) {
	b := string(docRead(t, "README.md"))
	out, err := os.ReadFile(filepath.Join(docRoot, "testdata/jobs/cpu/output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b, "\n"+string(out)) {
		t.Errorf("README's example output is not testdata/jobs/cpu/output.txt (%q)", out)
	}
	m := regexp.MustCompile(`output (\d+) bytes, sha256 ([0-9a-f]{64})`).FindStringSubmatch(b)
	sum := sha256.Sum256(out)
	switch {
	case m == nil:
		t.Error("README's example no longer shows the output's size and digest")
	case m[1] != strconv.Itoa(len(out)) || m[2] != hex.EncodeToString(sum[:]):
		t.Errorf("README's example says %s bytes, sha256 %s; the output is %d bytes, sha256 %x", m[1], m[2], len(out), sum)
	}
	for _, p := range []string{"testdata/jobs/cpu/cpu.wasm", "testdata/jobs/cpu/input.txt"} {
		if !strings.Contains(b, "submit "+p) && !strings.Contains(b, "--input "+p) {
			t.Errorf("README's example no longer runs %s", p)
		}
	}
}

// TestDocsLinks: every relative link in README.md and docs/*.md points at a
// file that exists (and, with #anchor, at a heading of it), and every
// repository path the documents name in backticks exists.
func TestDocsLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	path := regexp.MustCompile("`((?:abi|guest|host|node|proofs|payments|cmd|testdata|scripts|docs)/[^` ]*)`")
	links, paths := 0, 0
	for _, file := range docFileList(t) {
		b := docRead(t, file)
		for _, m := range link.FindAllSubmatch(b, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			name, anchor, _ := strings.Cut(target, "#")
			dest := file
			if name != "" {
				dest = filepath.Join(filepath.Dir(file), name)
			}
			if _, err := os.Stat(filepath.Join(docRoot, dest)); err != nil {
				t.Errorf("%s links to %s, which does not exist", file, target)
				continue
			}
			if anchor != "" && !slices.Contains(docAnchors(docRead(t, dest)), anchor) {
				t.Errorf("%s links to %s: %s has no heading #%s", file, target, dest, anchor)
			}
		}
		for _, m := range path.FindAllSubmatch(b, -1) {
			p := string(m[1])
			if strings.ContainsAny(p, "{*[") {
				continue
			}
			paths++
			if _, err := os.Stat(filepath.Join(docRoot, p)); err != nil {
				t.Errorf("%s names %s, which does not exist", file, p)
			}
		}
	}
	if links == 0 || paths == 0 {
		t.Errorf("found %d links and %d paths: the patterns are broken", links, paths)
	}
}

// docFileList are README.md and docs/*.md, relative to the repository root.
func docFileList(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(docRoot, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		rel, _ := filepath.Rel(docRoot, f)
		out = append(out, rel)
	}
	return out
}

// docProse is a document with every run of white space made one space, so
// that patterns do not depend on where lines break.
func docProse(t *testing.T, file string) []byte {
	t.Helper()
	return []byte(strings.Join(strings.Fields(string(docRead(t, file))), " "))
}

func docRead(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(docRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// docAnchors are the GitHub anchors of a Markdown file's headings.
func docAnchors(doc []byte) []string {
	var out []string
	count := map[string]int{}
	inCode := false
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := count[a]; n > 0 {
			a = fmt.Sprintf("%s-%d", a, n)
		}
		count[b.String()]++
		out = append(out, a)
	}
	return out
}

// docSame reports whether a document's text equals the code's value v.
func docSame(text string, v any) error {
	switch v := v.(type) {
	case string:
		if text != v {
			return fmt.Errorf("want %q", v)
		}
		return nil
	case docSize:
		n, err := docParseSize(text)
		if err != nil {
			return err
		}
		if n != v {
			return fmt.Errorf("%v, want %v", n, v)
		}
		return nil
	case time.Duration:
		d, err := docParseDuration(text)
		if err != nil {
			return err
		}
		if d != v {
			return fmt.Errorf("%v, want %v", d, v)
		}
		return nil
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(text, ",", ""), 64)
	if err != nil {
		return err
	}
	var want float64
	switch v := v.(type) {
	case int:
		want = float64(v)
	case int64:
		want = float64(v)
	case uint64:
		want = float64(v)
	case float64:
		want = v
	default:
		return fmt.Errorf("cannot compare with %T", v)
	}
	if f != want {
		return fmt.Errorf("want %v", want)
	}
	return nil
}

// docParseSize reads "64 MiB", "512 KiB", "1 GiB", "256MiB" or a plain count.
func docParseSize(s string) (docSize, error) {
	s = strings.ReplaceAll(strings.ReplaceAll(s, " ", ""), ",", "")
	shift := 0
	for _, u := range []struct {
		unit  string
		shift int
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}} {
		if n, ok := strings.CutSuffix(s, u.unit); ok {
			s, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	return docSize(n << shift), nil
}

// docParseDuration reads "60 s", "2 min", "1 h", "7 days" or "7-day".
func docParseDuration(s string) (time.Duration, error) {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '-' })
	if len(f) != 2 {
		return 0, fmt.Errorf("duration %q: want a number and a unit", s)
	}
	n, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, err
	}
	unit := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "min": time.Minute, "h": time.Hour,
		"day": 24 * time.Hour, "days": 24 * time.Hour}[f[1]]
	if unit == 0 {
		return 0, fmt.Errorf("duration %q: unknown unit", s)
	}
	return time.Duration(n * float64(unit)), nil
}

func docPercent(f float64) int { return int(f*100 + 0.5) }

func docAtoi(t *testing.T, b []byte) int {
	t.Helper()
	n, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func docAnys[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func docOrdinal(t *testing.T, n int) string {
	t.Helper()
	words := []string{"", "first", "second", "third", "fourth", "fifth"}
	if n <= 0 || n >= len(words) {
		t.Fatalf("no word for %d", n)
	}
	return words[n]
}

func docBackticked(s string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// docDeadlineFactor and docDeadlineExtra are the terms of a job's default
// deadline, k × timeout + c, read off Spec.setDefaults.
func docDeadlineFactor() int {
	d1, d2 := docDefaultDeadline(time.Minute), docDefaultDeadline(2*time.Minute)
	return int((d2 - d1) / time.Minute)
}

func docDeadlineExtra() time.Duration {
	return docDefaultDeadline(time.Minute) - time.Duration(docDeadlineFactor())*time.Minute
}

func docDefaultDeadline(timeout time.Duration) time.Duration {
	s := Spec{Terms: wire.Terms{TimeoutMS: timeout.Milliseconds()}}
	s.setDefaults()
	return s.Deadline
}

// docFetchRate is the rate fetchTime allows beyond its fixed part, in bytes
// per second.
func docFetchRate(t *testing.T) docSize {
	t.Helper()
	base := fetchTime(0)
	for rate := int64(1 << 10); rate <= 1<<30; rate <<= 1 {
		if fetchTime(100*rate) == base+100*time.Second {
			return docSize(rate)
		}
	}
	t.Fatal("fetchTime allows no power-of-two rate")
	return 0
}

func docPortOf(t *testing.T, addr string) int {
	t.Helper()
	f := strings.Split(addr, "/")
	for i := range f[:len(f)-1] {
		if f[i] == "tcp" {
			n, err := strconv.Atoi(f[i+1])
			if err == nil {
				return n
			}
		}
	}
	t.Fatalf("no TCP port in %s", addr)
	return 0
}

func docFairCapacity(t *testing.T, template int) int {
	t.Helper()
	tm, err := fair.Compile(template)
	if err != nil {
		t.Fatal(err)
	}
	return tm.Capacity()
}

// docCircuitSizes compiles the named templates: their constraints and the
// log2 of their phase-2 domains.
func docCircuitSizes(t *testing.T, names ...string) (constraints, domains map[string]int) {
	t.Helper()
	constraints, domains = map[string]int{}, map[string]int{}
	for _, name := range names {
		c, err := keys.Compile(name)
		if err != nil {
			t.Fatal(err)
		}
		constraints[name] = c.CCS.GetNbConstraints()
		domains[name] = bits.Len64(c.DomainSize()) - 1
	}
	return constraints, domains
}

// Files outside Go's reach from this package: scripts, go.mod, the
// Makefile, and Go sources of internal packages and guests, read as text.

func docRepoFile(t *testing.T, path string) string {
	t.Helper()
	return string(docRead(t, path))
}

func docShellVar(t *testing.T, path, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `=(\S+)`).FindStringSubmatch(docRepoFile(t, path))
	if m == nil {
		t.Fatalf("%s sets no %s", path, name)
	}
	return m[1]
}

func docGoModVersion(t *testing.T, module string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + ` (v\S+)`).FindStringSubmatch(docRepoFile(t, "go.mod"))
	if m == nil {
		t.Fatalf("go.mod requires no %s", module)
	}
	return m[1]
}

func docGoVersion(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(docRepoFile(t, "go.mod"))
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return m[1]
}

// docFuzzTime is FUZZTIME in the Makefile, the default of `make fuzz`.
func docFuzzTime(t *testing.T) time.Duration {
	t.Helper()
	re := `(?m)^FUZZTIME \?= (\d+)s$`
	m := regexp.MustCompile(re).FindStringSubmatch(docRepoFile(t, "Makefile"))
	if m == nil {
		t.Fatalf("Makefile: no match for %s", re)
	}
	n, _ := strconv.Atoi(m[1])
	return time.Duration(n) * time.Second
}

func docBenchTimeout(t *testing.T) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`run \$wasm --input \$in --timeout (\d+)s`).FindStringSubmatch(docRepoFile(t, "scripts/bench.sh"))
	if m == nil {
		t.Fatal("scripts/bench.sh: no time limit for (a)")
	}
	n, _ := strconv.Atoi(m[1])
	return time.Duration(n) * time.Second
}

// docRegtestNodes are the lnd nodes of scripts/regtest.sh: how many, in
// words, and their names as the documents list them.
func docRegtestNodes(t *testing.T) []any {
	t.Helper()
	m := regexp.MustCompile(`(?m)^NODES=\(([^)]*)\)`).FindStringSubmatch(docRepoFile(t, "scripts/regtest.sh"))
	if m == nil {
		t.Fatal("scripts/regtest.sh has no NODES")
	}
	nodes := strings.Fields(m[1])
	words := []string{"no", "one", "two", "three", "four", "five", "six"}
	if len(nodes) >= len(words) {
		t.Fatalf("%d nodes", len(nodes))
	}
	list := strings.Join(nodes[:len(nodes)-1], ", ") + " and " + nodes[len(nodes)-1]
	return []any{words[len(nodes)], list}
}

// docEval evaluates a constant expression without identifiers, or with
// time's units and the host defaults the CLI uses. Strings that read as
// sizes ("256MiB") become sizes, durations time.Duration, numbers float64.
func docEval(e ast.Expr) (any, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			if err != nil {
				return nil, err
			}
			if n, err := docParseSize(s); err == nil && strings.ContainsAny(s, "KMG") {
				return n, nil
			}
			return s, nil
		}
	case *ast.SelectorExpr:
		known := map[string]any{"time.Millisecond": time.Millisecond, "time.Second": time.Second,
			"time.Minute": time.Minute, "time.Hour": time.Hour, "host.DefaultTimeout": host.DefaultTimeout}
		if v, ok := known[types.ExprString(e)]; ok {
			return v, nil
		}
	case *ast.BinaryExpr:
		if e.Op == token.MUL {
			a, err := docEval(e.X)
			if err != nil {
				return nil, err
			}
			b, err := docEval(e.Y)
			if err != nil {
				return nil, err
			}
			n, ok1 := a.(float64)
			d, ok2 := b.(time.Duration)
			if ok1 && ok2 {
				return time.Duration(n) * d, nil
			}
		}
	case *ast.ParenExpr:
		return docEval(e.X)
	}
	tv, err := types.Eval(token.NewFileSet(), nil, token.NoPos, types.ExprString(e))
	if err != nil {
		return nil, err
	}
	if tv.Value == nil {
		return nil, fmt.Errorf("%s is not constant", types.ExprString(e))
	}
	f, _ := constant.Float64Val(constant.ToFloat(tv.Value))
	return f, nil
}

func docMustEval(t *testing.T, e ast.Expr) any {
	t.Helper()
	v, err := docEval(e)
	if err != nil {
		t.Fatalf("cannot evaluate %s: %v", types.ExprString(e), err)
	}
	return v
}

func docParseGo(t *testing.T, path string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(docRoot, path), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// docFileConsts are the named constants of a Go file (each must be there and
// need no other identifier); durations are in nanoseconds.
func docFileConsts(t *testing.T, path string, names ...string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, d := range docParseGo(t, path).Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) && slices.Contains(names, name.Name) {
					var v float64
					switch x := docMustEval(t, vs.Values[i]).(type) {
					case float64:
						v = x
					case time.Duration: // in nanoseconds
						v = float64(x)
					default:
						t.Fatalf("%s: %s is not a number", path, name.Name)
					}
					out[name.Name] = v
				}
			}
		}
	}
	for _, name := range names {
		if _, ok := out[name]; !ok {
			t.Fatalf("%s has no constant %s", path, name)
		}
	}
	return out
}

// docAssignedDefaults are the values of the named assignments of a Go file
// (`cfg.X = value`: its defaults for zero config fields).
func docAssignedDefaults(t *testing.T, path string, names ...string) map[string]any {
	t.Helper()
	out := map[string]any{}
	ast.Inspect(docParseGo(t, path), func(n ast.Node) bool {
		if a, ok := n.(*ast.AssignStmt); ok && a.Tok == token.ASSIGN && len(a.Lhs) == 1 && len(a.Rhs) == 1 {
			if lhs := types.ExprString(a.Lhs[0]); slices.Contains(names, lhs) {
				out[lhs] = docMustEval(t, a.Rhs[0])
			}
		}
		return true
	})
	for _, name := range names {
		if _, ok := out[name]; !ok {
			t.Fatalf("%s assigns no %s", path, name)
		}
	}
	return out
}

// docCLI is the CLI's Go source (cmd/infernet/internal/cli, internal to
// cmd/infernet, so read as text).
type docCLI []*ast.File

func docCLISource(t *testing.T) docCLI {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(docRoot, "cmd/infernet/internal/cli/*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CLI sources (%v)", err)
	}
	var out docCLI
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		rel, _ := filepath.Rel(docRoot, p)
		out = append(out, docParseGo(t, rel))
	}
	return out
}

// constant is the value of a package-level constant of the CLI.
func (c docCLI) constant(t *testing.T, name string) any {
	t.Helper()
	for _, f := range c {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if n.Name == name && i < len(vs.Values) {
							return docMustEval(t, vs.Values[i])
						}
					}
				}
			}
		}
	}
	t.Fatalf("the CLI has no constant %s", name)
	return nil
}

// flagDefault is the default of flag --name as the CLI function cmd
// (NewCmdRun, NewCmdNode, ...) declares it, itself or in a function it
// calls (addTermsFlags): f.XxxVar(&v, "name", default, usage) or
// f.XxxVarP(&v, "name", "n", default, usage).
func (c docCLI) flagDefault(t *testing.T, cmd, name string) any {
	t.Helper()
	if def := c.findFlag(cmd, name, 3); def != nil {
		return docMustEval(t, def)
	}
	t.Fatalf("the CLI's %s declares no flag --%s", cmd, name)
	return nil
}

func (c docCLI) findFlag(fn, name string, depth int) ast.Expr {
	body := c.funcBody(fn)
	if body == nil || depth == 0 {
		return nil
	}
	var def ast.Expr
	var callees []string
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || def != nil {
			return def == nil
		}
		if id, ok := call.Fun.(*ast.Ident); ok {
			callees = append(callees, id.Name)
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || len(call.Args) < 3 {
			return true
		}
		if lit, ok := call.Args[1].(*ast.BasicLit); !ok || lit.Value != strconv.Quote(name) {
			return true
		}
		switch {
		case strings.HasSuffix(sel.Sel.Name, "VarP") && len(call.Args) >= 4:
			def = call.Args[3]
		case strings.HasSuffix(sel.Sel.Name, "Var"):
			def = call.Args[2]
		}
		return def == nil
	})
	for _, callee := range callees {
		if def != nil {
			break
		}
		def = c.findFlag(callee, name, depth-1)
	}
	return def
}

func (c docCLI) funcBody(name string) *ast.BlockStmt {
	for _, f := range c {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == name {
				return fn.Body
			}
		}
	}
	return nil
}
