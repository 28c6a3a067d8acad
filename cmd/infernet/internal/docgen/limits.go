package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/cmd/infernet/internal/cli"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/blob/blobnet"
	"github.com/infernet/infernet/node/gossip"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
)

// limit is one row of a table of limits: the constant's name as Go code
// spells it, its value, and what it bounds.
type limit struct {
	name    string
	value   any
	meaning string
}

// size is a byte count written as a size ("64 MiB").
type size int64

// limitTables are the tables of limits by the name their marker gives.
var limitTables = map[string][]limit{
	"sandbox": {
		{"host.DefaultMemoryLimit", size(host.DefaultMemoryLimit), "memory of a job: linear memory and host tensors together; the module's memory maximum is rewritten to it"},
		{"host.DefaultTimeout", host.DefaultTimeout, "wall clock of a run"},
		{"host.DefaultMaxOutput", size(host.DefaultMaxOutput), "stdout, the output"},
		{"host.DefaultMaxStderr", size(host.DefaultMaxStderr), "stderr"},
		{"host.MaxTableElements", host.MaxTableElements, "table elements, host memory outside the memory limit"},
		{"host.DefaultMaxProofs", host.DefaultMaxProofs, "proven GEMMs of a proof-mode job"},
		{"host.DefaultModelCache", size(host.DefaultModelCache), "model weights kept loaded across jobs, outside every job's memory limit"},
		{"host.DefaultDeviceCache", size(host.DefaultDeviceCache), "copies of those weights in a GPU's memory"},
		{"host.DefaultCacheDirBytes", size(host.DefaultCacheDirBytes), "compiled modules kept on disk in `--cache-dir` (`--cache-size`); the oldest written go first"},
		{"host.MaxModuleFunctions", host.MaxModuleFunctions, "functions a module may define; the four limits on a module bound its compile time"},
		{"host.MaxModuleCodeBytes", size(host.MaxModuleCodeBytes), "code of a module, all function bodies together"},
		{"host.MaxModuleFunctionBytes", size(host.MaxModuleFunctionBytes), "code of one function"},
		{"host.MaxModuleNesting", host.MaxModuleNesting, "depth of control nesting"},
	},
	"chat": {
		{"models.TemplateMemory", size(models.TemplateMemory), "memory of a chat template's job: the guest, the request and the prompt"},
		{"models.TemplateFuel", models.TemplateFuel, "fuel of a chat template's job, its work: the same bound on every machine"},
		{"models.TemplateTimeout", models.TemplateTimeout, "wall clock of a chat template's job, a backstop of its fuel on a loaded machine"},
		{"models.TemplateOutput", size(models.TemplateOutput), "a rendered prompt, at most"},
	},
	"tensor": {
		{"abi.Version", abi.Version, "the tensor ABI's version, what `abi_version()` answers"},
		{"abi.MaxDims", abi.MaxDims, "dimensions of a tensor's shape, at most"},
		{"abi.LayerNormEps", abi.LayerNormEps, "ε of layer normalization"},
	},
	"job": {
		{"wire.MaxReplicas", wire.MaxReplicas, "replicas of a job, at most"},
		{"wire.MaxTimeout", wire.MaxTimeout, "run time limit a job may ask for, at most"},
		{"wire.MaxModuleBytes", size(wire.MaxModuleBytes), "a job's module, at most"},
		{"wire.MaxInputBytes", size(wire.MaxInputBytes), "a job's input, at most"},
		{"wire.MaxInline", size(wire.MaxInline), "an input this small travels inline with the assignment"},
		{"wire.MaxRequire", wire.MaxRequire, "bytes of a `--require` expression's text"},
		{"requirement.MaxNodes", requirement.MaxNodes, "syntax nodes of a `--require` expression"},
		{"requirement.MaxDepth", requirement.MaxDepth, "nesting of a `--require` expression"},
		{"wire.MaxShards", wire.MaxShards, "shards of a sharded job"},
		{"wire.MaxData", wire.MaxData, "data blobs a job may mount"},
		{"wire.MaxDataBytes", size(wire.MaxDataBytes), "those data blobs together"},
		{"wire.MaxGossipMessage", size(wire.MaxGossipMessage), "a gossip message"},
		{"wire.MaxGossipRPC", size(wire.MaxGossipRPC), "a GossipSub RPC"},
		{"node.MaxAggregateShards", node.MaxAggregateShards, "shards of a job an aggregator takes over"},
	},
	"node": {
		{"node.DefaultListenPort", node.DefaultListenPort, "TCP and QUIC port a node listens on"},
		{"node.DefaultMaxMemory", size(node.DefaultMaxMemory), "largest job memory a provider accepts (`--max-memory`)"},
		{"node.DefaultMaxOutput", size(node.DefaultMaxOutput), "largest output limit a provider accepts (`--max-output`)"},
		{"node.DefaultMaxModule", size(node.DefaultMaxModule), "largest module a provider accepts (`--max-module`)"},
		{"node.DefaultMaxInput", size(node.DefaultMaxInput), "largest input a provider accepts (`--max-input`)"},
		{"node.DefaultMaxData", size(node.DefaultMaxData), "most data blobs a provider lets one job mount (`--max-data`)"},
		{"node.DefaultMaxTimeout", node.DefaultMaxTimeout, "longest run time limit a provider accepts (`--max-timeout`)"},
		{"node.DefaultMaxDeadline", node.DefaultMaxDeadline, "furthest deadline a provider accepts, from the offer (`--max-deadline`)"},
		{"node.DefaultBlobQuota", size(node.DefaultBlobQuota), "disk for blobs (`--blob-quota`)"},
		{"node.DefaultBlobRetention", node.DefaultBlobRetention, "blobs nothing has used for this long are removed"},
		{"node.DefaultQueuePerSlot", node.DefaultQueuePerSlot, "replicas that may wait per slot (and sessions for a session's place); one client may hold slots + sessions + queue/2 places (`--max-per-client`), of each kind its running places + queue/2"},
		{"node.DefaultSessionsPerSlot", node.DefaultSessionsPerSlot, "sessions of the built-in llama runner on a model that run per slot, besides the slots' jobs (`--sessions`; batched, sharing the model cache)"},
		{"node.DefaultAdvertInterval", node.DefaultAdvertInterval, "how often a node republishes its advert (`--advert-interval`)"},
		{"node.DefaultHeartbeat", node.DefaultHeartbeat, "how often a running job reports to its client (`--heartbeat`)"},
		{"node.DefaultSilence", node.DefaultSilence, "a replica whose provider says nothing for this long is reassigned (`--silence`; at least 3 heartbeats)"},
		{"gossip.DefaultMaxSkew", gossip.DefaultMaxSkew, "how far a gossip message's timestamp may be from the local clock"},
		{"gossip.DefaultQueueSize", gossip.DefaultQueueSize, "depth of the gossip validation and per-peer outbound queues"},
		{"blobnet.DefaultParallelThreshold", size(blobnet.DefaultParallelThreshold), "blobs this large or larger are fetched in ranges from several sources"},
		{"blobnet.DefaultChunkSize", size(blobnet.DefaultChunkSize), "one such range"},
		{"blobnet.DefaultMaxSources", blobnet.DefaultMaxSources, "sources of one fetch, at most"},
		{"blobnet.DefaultMinRate", size(blobnet.DefaultMinRate), "per second: the slowest a fetch may be after its grace"},
		{"blobnet.DefaultRateGrace", blobnet.DefaultRateGrace, "that grace"},
		{"blobnet.DefaultMaxStreams", blobnet.DefaultMaxStreams, "requests a node's blob service answers at once"},
		{"blobnet.DefaultMaxPerPeer", blobnet.DefaultMaxPerPeer, "of them one peer's"},
		{"blobnet.DefaultReserved", blobnet.DefaultReserved, "of them kept for the peers the node works with (its providers and clients)"},
		{"blobnet.DefaultBusyRetry", blobnet.DefaultBusyRetry, "how long a fetch that found a source busy tries again"},
	},
	"verification": {
		{"reputation.Defaults.TrustStreak", reputation.Defaults.TrustStreak, "agreed results in a row, with no lie, that make a provider trusted"},
		{"reputation.Defaults.Probation", reputation.Defaults.Probation, "proven results that end a newcomer's probation"},
		{"reputation.Defaults.LieWeight", reputation.Defaults.LieWeight, "agreements one outvoted result cancels"},
		{"reputation.Defaults.HalfLife", reputation.Defaults.HalfLife, "half-life of every count"},
		{"reputation.Defaults.BanBelow", reputation.Defaults.BanBelow, "a score under this bans the peer"},
		{"reputation.Defaults.MaxLies", reputation.Defaults.MaxLies, "outvoted results that ban a peer whatever its score"},
		{"reputation.Defaults.BanFor", reputation.Defaults.BanFor, "how long a ban lasts"},
		{"reputation.MaxAdvertInterval", reputation.MaxAdvertInterval, "a peer's advert counts as fresh for at most this, whatever it declares"},
		{"node.DefaultSpotCheck", node.DefaultSpotCheck, "share of adaptive jobs on one trusted replica that are checked by a full set anyway"},
		{"node.DefaultAudit", node.DefaultAudit, "share of jobs a client also runs itself, at random (`node --audit`)"},
		{"node.DefaultAuditNew", node.DefaultAuditNew, "the share when a provider of the job has a new record (`node --audit-new`)"},
		{"node.NewRecord", node.NewRecord, "proven results (or results accepted with collateral at stake) that end a new record"},
		{"node.DefaultAuditCap", node.DefaultAuditCap, "most audits, as a share of a client's jobs (`node --audit-cap`)"},
		{"jobs.CollateralTimes", jobs.CollateralTimes, "a paid job's default collateral per replica, in times its price (`submit --collateral`)"},
		{"node.ProviderCollateralTimes", node.ProviderCollateralTimes, "a provider's default limit on collateral, in times its price (`node --max-collateral`)"},
		{"node.DefaultCanary", node.DefaultCanary, "share of adaptive jobs after which a known-answer job goes to a trusted provider"},
		{"node.DefaultCheckTie", node.DefaultCheckTie, "near-tie bound of a check job, in logits (`--check-tie`)"},
		{"llama.MaxTie", llama.MaxTie, "`--check-tie` at most"},
	},
	"exit": {
		{"cli.ExitOK", cli.ExitOK, "a verified result of a job that exited 0 (`run`: the job exited 0)"},
		{"cli.ExitUnverified", cli.ExitUnverified, "an unverified result (`--replicas 1` unless this node audits it, or no established provider and no audit), or a training run with a round on one replica only"},
		{"cli.ExitNoResult", cli.ExitNoResult, "no result: no matching provider, replicas disagree, deadline, the job's time limit (a provider's pace, or the job's own loop: not deterministic); a sharded job or training round with a shard or reduce that failed or exited non-zero"},
		{"cli.ExitNotRun", cli.ExitNotRun, "the job could not run or was stopped (invalid module, trap, a memory, fuel or output limit; what it wrote before the stop is still written); on the network, every replica agrees it could not. A module `submit` refuses before sending it is 1"},
		{"cli.ExitInterrupted", cli.ExitInterrupted, "stopped by Ctrl-C (SIGINT) or SIGTERM"},
		{"cli.ExitError", cli.ExitError, "any other error"},
	},
	"payments": {
		{"payments.HoldCltv", payments.HoldCltv, "final CLTV delta of a provider's hold invoice, in blocks"},
		{"payments.MaxInvoiceCltv", payments.MaxInvoiceCltv, "a client pays no invoice whose final CLTV delta is more blocks than this"},
		{"payments.MinInvoiceValidity", payments.MinInvoiceValidity, "nor one payable for less than this"},
		{"node.DefaultPaymentSweep", node.DefaultPaymentSweep, "how often open payments nobody handles are finished (and once at start)"},
	},
}

// limitTable is a Markdown table of rows.
func limitTable(rows []limit) string {
	var b strings.Builder
	b.WriteString("| constant | value | meaning |\n| --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.name, formatValue(r.value), cellText(r.meaning))
	}
	return b.String()
}

// formatValue writes v as the documents write figures: sizes in the
// largest binary unit that divides them, durations in the largest unit
// that divides them (days from two on), counts with thousands separators.
func formatValue(v any) string {
	switch v := v.(type) {
	case size:
		for _, u := range []struct {
			unit  string
			shift uint
		}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
			if v > 0 && v%(1<<u.shift) == 0 {
				return fmt.Sprintf("%d %s", v>>u.shift, u.unit)
			}
		}
		return fmt.Sprintf("%s bytes", thousands(int64(v)))
	case time.Duration:
		for _, u := range []struct {
			unit string
			d    time.Duration
		}{{"days", 24 * time.Hour}, {"h", time.Hour}, {"min", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}} {
			if v >= 2*u.d && v%u.d == 0 || u.unit != "days" && v > 0 && v%u.d == 0 {
				return fmt.Sprintf("%d %s", v/u.d, u.unit)
			}
		}
		return v.String()
	case int:
		return thousands(int64(v))
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32)
	}
	return fmt.Sprint(v)
}

// thousands writes n with a comma between each group of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 || len(s) <= 4 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
