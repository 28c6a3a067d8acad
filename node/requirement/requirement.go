// Package requirement evaluates the requirement expressions that clients put
// on jobs, such as `vram >= 16 && reputation > 0.8`, against what a provider
// advertises. Expressions are compiled once with expr-lang/expr, type-checked
// against Env (unknown names are errors at compile time), must be boolean,
// and run under a memory budget.
//
// Expressions come from strangers (every job announce carries one, and
// every provider compiles it), so Compile bounds their cost before
// compiling: at most MaxNodes syntax nodes nested MaxDepth deep, a
// short list of builtins, no variables, ranges or regular expressions
// (matches), no closure (all, any, filter...) inside another, and an estimated evaluation cost of at most
// MaxCost steps. Compiled programs are kept in a small LRU cache keyed by
// their text, so a repeated expression costs a map lookup.
package requirement

import (
	"container/list"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"github.com/infernet/infernet/node/wire"
)

// Limits of an expression, beyond the wire's MaxRequire bytes. Honest
// expressions (`vram >= 16 && has("cuda") && price <= 500`) use a tenth
// of them.
const (
	// MaxNodes caps an expression's syntax nodes.
	MaxNodes = 128
	// MaxDepth caps how deeply they nest.
	MaxDepth = 64
	// MaxCost caps the estimated evaluation steps: a node counts once, or
	// once per element of the list it is evaluated for inside a closure.
	MaxCost = 4096
	// MaxList is the longest list an Env may hold (Backends): the wire
	// caps an advert's backends at 16. Match refuses longer ones.
	MaxList = 16
)

// builtins are the expr builtins an expression may call: predicates over
// lists, and string and number helpers whose cost is linear in their
// input. Those that build large values from small ones (repeat, split,
// sort, ranges...) or depend on the clock are left out.
var builtins = []string{
	"all", "none", "any", "one", "filter", "map", "find", "findIndex", "findLast", "findLastIndex", "count",
	"len", "abs", "ceil", "floor", "round", "int", "float", "string", "trim", "trimPrefix", "trimSuffix",
	"upper", "lower", "indexOf", "lastIndexOf", "hasPrefix", "hasSuffix", "max", "min", "sum", "first", "last",
}

// closures are the builtins whose second argument is evaluated once per
// element of their first.
var closures = map[string]bool{
	"all": true, "none": true, "any": true, "one": true, "filter": true, "map": true, "find": true,
	"findIndex": true, "findLast": true, "findLastIndex": true, "count": true, "sum": true,
}

// Env is what an expression can name. Sizes are in GiB, prices in
// millisatoshi, reputation in [0, 1].
type Env struct {
	Cores      int      `expr:"cores"`
	Memory     float64  `expr:"memory"`    // GiB of RAM
	MaxMemory  float64  `expr:"maxmemory"` // GiB a job may use
	GPUs       int      `expr:"gpus"`
	VRAM       float64  `expr:"vram"` // GiB of the largest GPU
	GPU        string   `expr:"gpu"`  // name of the first GPU, "" without
	CC         float64  `expr:"cc"`   // compute capability of the best GPU, e.g. 8.6
	Backends   []string `expr:"backends"`
	Price      float64  `expr:"price"`
	Slots      int      `expr:"slots"`
	FreeSlots  int      `expr:"free"`
	Reputation float64  `expr:"reputation"`
	Version    string   `expr:"version"`
	// Has reports whether a tensor backend is offered, by prefix:
	// has("cuda"), has("cpu-avx512").
	Has func(prefix string) bool `expr:"has"`
}

// Names lists the names an expression can use, for help texts, with
// their units (Env's).
const Names = "cores, memory, maxmemory and vram (GiB), gpus, gpu (a name), cc (compute capability, e.g. 8.6), backends, price (millisatoshi), slots, free, reputation (0 to 1), version, has(\"backend\")"

var (
	// ErrInvalid is returned by Compile for an expression that does not
	// parse, names unknown fields or is not boolean, or is too complex.
	ErrInvalid = errors.New("requirement: invalid expression")
	// ErrTooComplex is returned (with ErrInvalid) by Compile for an
	// expression over one of the limits (MaxNodes, MaxDepth, MaxCost) or
	// using what they forbid.
	ErrTooComplex = errors.New("too complex")
)

// Program is a compiled expression. It is immutable and safe for
// concurrent use: Compile hands the same Program to every caller of the
// same text.
type Program struct {
	src  string
	prog *vm.Program // read-only once compiled; expr.Run makes a VM per run
}

// Always is the empty requirement: every provider matches.
var Always = &Program{}

// options are expr's options for every expression.
var options = func() []expr.Option {
	opts := []expr.Option{expr.Env(Env{}), expr.AsBool(), expr.MaxNodes(MaxNodes), expr.DisableAllBuiltins()}
	for _, b := range builtins {
		opts = append(opts, expr.EnableBuiltin(b))
	}
	return opts
}()

// Compile compiles src; an empty src matches every provider. Results,
// errors included, are cached by src (the last CacheSize texts), so
// repeating an expression costs no compilation.
func Compile(src string) (*Program, error) {
	if len(src) > wire.MaxRequire { // blank or not: the announce carries it
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalid, wire.MaxRequire)
	}
	if strings.TrimSpace(src) == "" {
		return Always, nil
	}
	return programs.get(src)
}

// compile compiles src, uncached.
func compile(src string) (*Program, error) {
	if d := bracketDepth(src); d > MaxDepth {
		// Refused before parsing: the parser recurses once per level.
		return nil, fmt.Errorf("%w: %w: brackets nested %d deep, limit %d", ErrInvalid, ErrTooComplex, d, MaxDepth)
	}
	cfg := conf.CreateNew()
	for _, o := range options {
		o(cfg)
	}
	tree, err := parser.ParseWithConfig(src, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, strings.TrimSpace(err.Error()))
	}
	if err := checkCost(tree.Node); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	p, err := expr.Compile(src, options...)
	if err != nil {
		msg := strings.TrimSpace(err.Error())
		if strings.Contains(msg, "unknown name") {
			msg += "; the names are " + Names
		}
		return nil, fmt.Errorf("%w: %s", ErrInvalid, msg)
	}
	return &Program{src: src, prog: p}, nil
}

// bracketDepth returns how deeply src nests brackets outside string
// literals.
func bracketDepth(src string) int {
	depth, deepest := 0, 0
	var quote byte // the open string's quote, or 0
	for i := 0; i < len(src); i++ {
		switch ch := src[i]; {
		case quote != 0 && quote != '`' && ch == '\\':
			i++ // skip the escaped byte
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '"' || ch == '\'' || ch == '`':
			quote = ch
		case ch == '(' || ch == '[' || ch == '{':
			depth++
			deepest = max(deepest, depth)
		case ch == ')' || ch == ']' || ch == '}':
			depth--
		}
	}
	return deepest
}

// checkCost walks a parsed expression and refuses it if it is over the
// limits or uses what they forbid.
func checkCost(root ast.Node) error {
	c := &coster{}
	cost := c.cost(root, 1, 0, false)
	switch {
	case c.err != nil:
		return c.err
	case c.nodes > MaxNodes:
		return fmt.Errorf("%w: %d nodes, limit %d", ErrTooComplex, c.nodes, MaxNodes)
	case cost > MaxCost:
		return fmt.Errorf("%w: cost %d, limit %d", ErrTooComplex, cost, MaxCost)
	}
	return nil
}

// coster estimates an expression's evaluation steps.
type coster struct {
	nodes int
	err   error
}

func (c *coster) fail(format string, args ...any) int {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{ErrTooComplex}, args...)...)
	}
	return 0
}

// cost returns the steps of evaluating n times times (n is inside closures
// over lists of that many elements), depth deep; inClosure is set inside a
// closure builtin's arguments.
func (c *coster) cost(n ast.Node, times, depth int, inClosure bool) int {
	if n == nil || c.err != nil {
		return 0
	}
	c.nodes++
	if depth > MaxDepth {
		return c.fail("nested deeper than %d", MaxDepth)
	}
	if c.nodes > MaxNodes {
		return c.fail("more than %d nodes", MaxNodes)
	}
	d := depth + 1
	sub := func(ns ...ast.Node) int {
		sum := 0
		for _, x := range ns {
			sum += c.cost(x, times, d, inClosure)
		}
		return sum
	}
	switch n := n.(type) {
	case *ast.NilNode, *ast.IdentifierNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode,
		*ast.StringNode, *ast.ConstantNode, *ast.PointerNode:
		return times
	case *ast.UnaryNode:
		return times + sub(n.Node)
	case *ast.BinaryNode:
		switch n.Operator {
		case "..":
			return c.fail("ranges are not allowed")
		case "matches":
			// A regexp of a few hundred bytes can cost milliseconds to
			// compile, and every announce would bring a new one.
			return c.fail("matches is not allowed; use contains, startsWith, endsWith or in")
		case "in", "not in":
			return times*(1+listLen(n.Right)) + sub(n.Left, n.Right)
		}
		return times + sub(n.Left, n.Right)
	case *ast.ChainNode:
		return times + sub(n.Node)
	case *ast.MemberNode:
		return times + sub(n.Node, n.Property)
	case *ast.SliceNode:
		return times + sub(n.Node, n.From, n.To)
	case *ast.CallNode:
		// has() scans the backends.
		return times*(1+MaxList) + sub(append([]ast.Node{n.Callee}, n.Arguments...)...)
	case *ast.BuiltinNode:
		if !slices.Contains(builtins, n.Name) {
			return c.fail("builtin %s is not allowed", n.Name)
		}
		if !closures[n.Name] || len(n.Arguments) < 2 {
			// len, max, sum... of a list read it once.
			l := 0
			if len(n.Arguments) > 0 {
				l = listLen(n.Arguments[0])
			}
			return times*(1+l) + sub(n.Arguments...)
		}
		if inClosure {
			return c.fail("%s inside another closure", n.Name)
		}
		l := listLen(n.Arguments[0])
		sum := times + c.cost(n.Arguments[0], times, d, true)
		for _, a := range n.Arguments[1:] {
			sum += c.cost(a, times*max(l, 1), d, true)
		}
		return sum
	case *ast.PredicateNode:
		return times + sub(n.Node)
	case *ast.ConditionalNode:
		return times + sub(n.Cond, n.Exp1, n.Exp2)
	case *ast.ArrayNode:
		return times + sub(n.Nodes...)
	case *ast.MapNode:
		return times + sub(n.Pairs...)
	case *ast.PairNode:
		return times + sub(n.Key, n.Value)
	case *ast.VariableDeclaratorNode, *ast.SequenceNode:
		return c.fail("variables and sequences are not allowed")
	default:
		return c.fail("%T is not allowed", n)
	}
}

// listLen bounds the length of the list n evaluates to: a literal's
// length, MaxList for the Env's lists, and for what filters or maps or
// slices a list, that list's bound.
func listLen(n ast.Node) int {
	switch n := n.(type) {
	case *ast.ArrayNode:
		return len(n.Nodes)
	case *ast.IdentifierNode:
		return MaxList
	case *ast.BuiltinNode:
		if (n.Name == "filter" || n.Name == "map") && len(n.Arguments) > 0 {
			return listLen(n.Arguments[0])
		}
	case *ast.SliceNode:
		return listLen(n.Node)
	case *ast.ConditionalNode:
		return max(listLen(n.Exp1), listLen(n.Exp2))
	case *ast.BinaryNode:
		if n.Operator == "??" {
			return max(listLen(n.Left), listLen(n.Right))
		}
	}
	// Members of lists of lists, pointers: no list here is longer than
	// MaxList or the expression's own literals, which MaxNodes bounds.
	return max(MaxList, MaxNodes)
}

// CacheSize is how many compiled expressions Compile keeps, most recently
// used first.
const CacheSize = 512

// programs is Compile's cache.
var programs = newCache(CacheSize)

// cache is a bounded LRU cache of compilations by source text. It is safe
// for concurrent use; two callers missing the same text at once may both
// compile it (the result is the same).
type cache struct {
	size int
	mu   sync.Mutex // guards m and lru
	m    map[string]*list.Element
	lru  *list.List // of *compiled, front: most recently used
}

type compiled struct {
	src string
	p   *Program
	err error
}

func newCache(size int) *cache {
	return &cache{size: size, m: make(map[string]*list.Element), lru: list.New()}
}

// get returns the compilation of src, compiling it on a miss.
func (c *cache) get(src string) (*Program, error) {
	c.mu.Lock()
	if el, ok := c.m[src]; ok {
		c.lru.MoveToFront(el)
		e := el.Value.(*compiled)
		c.mu.Unlock()
		return e.p, e.err
	}
	c.mu.Unlock()
	p, err := compile(src) // outside the lock: compiles of other texts go on
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[src]; !ok {
		c.m[src] = c.lru.PushFront(&compiled{src, p, err})
		if c.lru.Len() > c.size {
			old := c.lru.Back()
			c.lru.Remove(old)
			delete(c.m, old.Value.(*compiled).src)
		}
	}
	return p, err
}

// String returns the source.
func (p *Program) String() string { return p.src }

// Match evaluates the expression. Runtime errors (such as an index out of
// range) are errors, never a match, and so is an env of more than MaxList
// backends.
func (p *Program) Match(env Env) (bool, error) {
	if p.prog == nil {
		return true, nil
	}
	if len(env.Backends) > MaxList {
		return false, fmt.Errorf("requirement %q: %d backends, limit %d", p.src, len(env.Backends), MaxList)
	}
	if env.Has == nil {
		env.Has = func(prefix string) bool {
			return slices.ContainsFunc(env.Backends, func(b string) bool { return strings.HasPrefix(b, prefix) })
		}
	}
	out, err := expr.Run(p.prog, env)
	if err != nil {
		return false, fmt.Errorf("requirement %q: %w", p.src, err)
	}
	// AsBool does not make every expression a bool: "{}.A" is nil at run
	// time, and asserting it crashed every provider that saw the announce.
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("requirement %q: %T, not a boolean", p.src, out)
	}
	return b, nil
}

// FromAdvert fills an Env from a provider's advert and the reputation this
// node gives it.
func FromAdvert(a *wire.CapabilityAdvert, reputation float64) Env {
	const gib = 1 << 30
	env := Env{
		Cores: a.Cores, Memory: float64(a.MemoryBytes) / gib, MaxMemory: float64(a.MaxMemory) / gib,
		GPUs: len(a.GPUs), Backends: a.Backends, Price: float64(a.Price),
		Slots: a.Slots, FreeSlots: a.FreeSlots, Reputation: reputation, Version: a.Software,
	}
	for i, g := range a.GPUs {
		if i == 0 {
			env.GPU = g.Name
		}
		env.VRAM = max(env.VRAM, float64(g.MemoryBytes)/gib)
		env.CC = max(env.CC, float64(g.ComputeMajor)+float64(g.ComputeMinor)/10)
	}
	return env
}
