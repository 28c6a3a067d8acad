// Command goguest is a test guest for package meter: it exercises the Go
// runtime (goroutines, GC, maps, interfaces, panics) and prints a
// deterministic summary, so metered and unmetered runs can be compared.
//
// Usage: goguest [N], where N scales the work (default 1000).
package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
)

func main() {
	n := 1000
	if len(os.Args) > 1 {
		v, err := strconv.Atoi(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		n = v
	}

	// Hashing: tight loops.
	sum := sha256.Sum256(nil)
	for i := 0; i < n; i++ {
		sum = sha256.Sum256(sum[:])
	}
	fmt.Printf("sha: %x\n", sum[:8])

	// Maps, sorting and strings: allocation and the GC.
	words := map[string]int{}
	for i := 0; i < n; i++ {
		words[strconv.Itoa(i*7919%1000)]++
	}
	keys := make([]string, 0, len(words))
	for k := range words {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Printf("words: %d first=%s last=%s\n", len(keys), keys[0], keys[len(keys)-1])
	fmt.Println("join:", len(strings.Join(keys, ",")))

	// Goroutines and channels: the scheduler.
	var wg sync.WaitGroup
	results := make(chan int, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			s := 0
			for i := 0; i < n; i++ {
				s += (i * g) % 13
			}
			results <- s
		}(g)
	}
	wg.Wait()
	close(results)
	total := 0
	for r := range results {
		total += r
	}
	fmt.Println("goroutines:", total)

	// Interfaces, closures, recursion, panics and recover.
	var shapes []fmt.Stringer
	for i := 0; i < 5; i++ {
		shapes = append(shapes, square(i))
	}
	fmt.Println("shapes:", shapes)
	fmt.Println("fib:", fib(20))
	fmt.Println("recovered:", safeDiv(1, 0))
	err := fmt.Errorf("wrapped: %w", errNotFound)
	fmt.Println("errors.Is:", errors.Is(err, errNotFound))
}

var errNotFound = errors.New("not found")

type square int

func (s square) String() string { return fmt.Sprintf("sq(%d)=%d", int(s), int(s)*int(s)) }

func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

func safeDiv(a, b int) (r string) {
	defer func() {
		if e := recover(); e != nil {
			r = fmt.Sprint(e)
		}
	}()
	return strconv.Itoa(a / b)
}
