package setup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	curve "github.com/consensys/gnark-crypto/ecc/bn254"
	"github.com/consensys/gnark-crypto/ecc/bn254/fp"
	"github.com/consensys/gnark-crypto/ecc/bn254/mpcsetup"
	p2 "github.com/consensys/gnark/backend/groth16/bn254/mpcsetup"
	"golang.org/x/crypto/blake2b"
)

// PtauInfo describes a .ptau file read by ReadPtau.
type PtauInfo struct {
	Power         uint32   // the file holds 2^Power powers (domain size)
	CeremonyPower uint32   // power of the ceremony the file was cut from
	SHA256        [32]byte // of the whole file, to pin it
	BLAKE2b512    [64]byte // of the whole file, as snarkjs and the PPoT/Hermez lists publish it
}

// snarkjs .ptau section ids (see snarkjs src/powersoftau_new.js).
const (
	ptauHeader     = 1
	ptauTauG1      = 2
	ptauTauG2      = 3
	ptauAlphaTauG1 = 4
	ptauBetaTauG1  = 5
	ptauBetaG2     = 6
)

const (
	ptauG1Size = 64  // x, y: 32-byte little-endian Montgomery-form field elements
	ptauG2Size = 128 // x.c0, x.c1, y.c0, y.c1
)

// ReadPtau imports circuit-independent phase-1 parameters from a snarkjs
// ".ptau" powers-of-tau file (BN254 "bn128"; prepared for phase 2 or not),
// keeping the first n powers: n is a power of two no larger than the file's
// 2^power, or 0 for all of them. It reads the whole stream, hashing it, so
// that the caller can compare the digest with the published one before
// trusting the parameters: the import checks that they are well formed (on
// the curve, in the subgroups, generators first, one consistent τ, α and β),
// not that τ is unknown — that trust comes from the public ceremony, which
// snarkjs ("powersoftau verify") checks from its file.
//
// Memory: the kept prefix only (about 192·n bytes, plus the decoded points).
func ReadPtau(r io.Reader, n uint64) (*p2.SrsCommons, PtauInfo, error) {
	var info PtauInfo
	hs := sha256.New()
	hb, _ := blake2b.New512(nil)
	br := bufio.NewReaderSize(io.TeeReader(r, io.MultiWriter(hs, hb)), 1<<20)

	var head [12]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		return nil, info, fmt.Errorf("ptau header: %w", err)
	}
	if string(head[:4]) != "ptau" {
		return nil, info, errors.New("not a ptau file")
	}
	if v := binary.LittleEndian.Uint32(head[4:]); v != 1 {
		return nil, info, fmt.Errorf("ptau version %d, want 1", v)
	}
	nbSections := binary.LittleEndian.Uint32(head[8:])

	var (
		c        p2.SrsCommons
		seen     = map[uint32]bool{}
		fileSize uint64 // 2^power
	)
	for range nbSections {
		var sh [12]byte
		if _, err := io.ReadFull(br, sh[:]); err != nil {
			return nil, info, fmt.Errorf("ptau section header: %w", err)
		}
		id := binary.LittleEndian.Uint32(sh[:])
		size := binary.LittleEndian.Uint64(sh[4:])
		if seen[id] {
			return nil, info, fmt.Errorf("ptau: duplicate section %d", id)
		}
		seen[id] = true
		if id != ptauHeader && id <= ptauBetaG2 && !seen[ptauHeader] {
			return nil, info, errors.New("ptau: header section must come first")
		}
		var err error
		switch id {
		case ptauHeader:
			if size != 44 {
				return nil, info, fmt.Errorf("ptau header section has %d bytes, want 44", size)
			}
			var b [44]byte
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return nil, info, err
			}
			if binary.LittleEndian.Uint32(b[:]) != 32 {
				return nil, info, errors.New("ptau: field element size is not 32 bytes")
			}
			q := fp.Modulus()
			var le [32]byte
			q.FillBytes(le[:])
			for i, j := 0, 31; i < j; i, j = i+1, j-1 {
				le[i], le[j] = le[j], le[i]
			}
			if !bytes.Equal(b[4:36], le[:]) {
				return nil, info, errors.New("ptau: not a BN254 (bn128) file")
			}
			info.Power = binary.LittleEndian.Uint32(b[36:])
			info.CeremonyPower = binary.LittleEndian.Uint32(b[40:])
			if info.Power < 1 || info.Power > 28 {
				return nil, info, fmt.Errorf("ptau: power %d out of range", info.Power)
			}
			fileSize = 1 << info.Power
			if n == 0 {
				n = fileSize
			}
			if err := checkDomainSize(n); err != nil {
				return nil, info, err
			}
			if n > fileSize {
				return nil, info, fmt.Errorf("ptau holds 2^%d powers, %d requested", info.Power, n)
			}
		case ptauTauG1:
			c.G1.Tau, err = readPtauG1(br, size, 2*fileSize-1, 2*n-1)
		case ptauTauG2:
			c.G2.Tau, err = readPtauG2(br, size, fileSize, n)
		case ptauAlphaTauG1:
			c.G1.AlphaTau, err = readPtauG1(br, size, fileSize, n)
		case ptauBetaTauG1:
			c.G1.BetaTau, err = readPtauG1(br, size, fileSize, n)
		case ptauBetaG2:
			var beta []curve.G2Affine
			if beta, err = readPtauG2(br, size, 1, 1); err == nil {
				c.G2.Beta = beta[0]
			}
		default: // contributions, Lagrange-basis sections of prepared files, ...
			_, err = io.CopyN(io.Discard, br, int64(size))
		}
		if err != nil {
			return nil, info, fmt.Errorf("ptau section %d: %w", id, err)
		}
	}
	for id := uint32(ptauHeader); id <= ptauBetaG2; id++ {
		if !seen[id] {
			return nil, info, fmt.Errorf("ptau: section %d missing", id)
		}
	}
	if _, err := io.Copy(io.Discard, br); err != nil { // hash any trailing bytes too
		return nil, info, err
	}
	copy(info.SHA256[:], hs.Sum(nil))
	copy(info.BLAKE2b512[:], hb.Sum(nil))

	if err := CheckCommons(&c); err != nil {
		return nil, info, fmt.Errorf("ptau: %w", err)
	}
	return &c, info, nil
}

// CheckCommons checks that phase-1 parameters are well formed: sizes, all
// points in their subgroups, [τ⁰] the generators, [τⁱ]₁, [τⁱ]₂, [ατⁱ]₁ and
// [βτⁱ]₁ geometric with one common ratio τ ≠ 0, α, β ≠ 0, and [β]₁ and [β]₂
// for the same β. It cannot check that nobody knows τ, α, β.
func CheckCommons(c *p2.SrsCommons) error {
	n := uint64(len(c.G1.AlphaTau))
	if err := checkDomainSize(n); err != nil {
		return err
	}
	if uint64(len(c.G1.Tau)) != 2*n-1 || uint64(len(c.G2.Tau)) != n || uint64(len(c.G1.BetaTau)) != n {
		return errors.New("commons: inconsistent vector sizes")
	}
	_, _, g1, g2 := curve.Generators()
	if !c.G1.Tau[0].Equal(&g1) || !c.G2.Tau[0].Equal(&g2) {
		return errors.New("commons: first powers are not the generators")
	}
	if c.G1.Tau[1].IsInfinity() || c.G1.AlphaTau[0].IsInfinity() || c.G1.BetaTau[0].IsInfinity() || c.G2.Beta.IsInfinity() {
		return errors.New("commons: zero τ, α or β")
	}
	if !allInSubGroupG1(c.G1.Tau, c.G1.AlphaTau, c.G1.BetaTau) || !allInSubGroupG2(c.G2.Tau, []curve.G2Affine{c.G2.Beta}) {
		return errors.New("commons: point not in the prime-order subgroup")
	}
	if err := mpcsetup.SameRatioMany(c.G1.Tau, c.G2.Tau, c.G1.AlphaTau, c.G1.BetaTau); err != nil {
		return fmt.Errorf("commons: not powers of one τ: %w", err)
	}
	var negG1 curve.G1Affine
	negG1.Neg(&g1)
	ok, err := curve.PairingCheck([]curve.G1Affine{c.G1.BetaTau[0], negG1}, []curve.G2Affine{g2, c.G2.Beta})
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("commons: [β]₁ and [β]₂ disagree")
	}
	return nil
}

// readPtauG1 reads a section of total points, of which it keeps the first keep.
func readPtauG1(r io.Reader, size, total, keep uint64) ([]curve.G1Affine, error) {
	if size != total*ptauG1Size {
		return nil, fmt.Errorf("%d bytes, want %d", size, total*ptauG1Size)
	}
	raw := make([]byte, keep*ptauG1Size)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, r, int64(size-uint64(len(raw)))); err != nil {
		return nil, err
	}
	out := make([]curve.G1Affine, keep)
	err := parallelConvert(int(keep), func(i int) error {
		b := raw[i*ptauG1Size:]
		return errors.Join(ptauFp(&out[i].X, b[0:32]), ptauFp(&out[i].Y, b[32:64]))
	})
	return out, err
}

func readPtauG2(r io.Reader, size, total, keep uint64) ([]curve.G2Affine, error) {
	if size != total*ptauG2Size {
		return nil, fmt.Errorf("%d bytes, want %d", size, total*ptauG2Size)
	}
	raw := make([]byte, keep*ptauG2Size)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, r, int64(size-uint64(len(raw)))); err != nil {
		return nil, err
	}
	out := make([]curve.G2Affine, keep)
	err := parallelConvert(int(keep), func(i int) error {
		b := raw[i*ptauG2Size:]
		return errors.Join(ptauFp(&out[i].X.A0, b[0:32]), ptauFp(&out[i].X.A1, b[32:64]),
			ptauFp(&out[i].Y.A0, b[64:96]), ptauFp(&out[i].Y.A1, b[96:128]))
	})
	return out, err
}

// ptauFp decodes snarkjs's field element encoding: the Montgomery form
// (x·2²⁵⁶ mod p), little endian — the same representation gnark's
// fp.Element keeps in memory, so the limbs are copied once the value is
// checked to be below p. The point at infinity is (0, 0) in both libraries.
func ptauFp(z *fp.Element, b []byte) error {
	var le [32]byte
	copy(le[:], b)
	if _, err := fp.LittleEndian.Element(&le); err != nil { // only checks < p
		return err
	}
	for i := range z {
		z[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return nil
}

func parallelConvert(n int, f func(i int) error) error {
	workers := max(1, min(runtime.NumCPU(), n/1024+1))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	chunk := (n + workers - 1) / workers
	for w := range workers {
		lo, hi := w*chunk, min(n, (w+1)*chunk)
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				if err := f(i); err != nil {
					mu.Lock()
					errs = errors.Join(errs, fmt.Errorf("point %d: %w", i, err))
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return errs
}

func allInSubGroupG1(vs ...[]curve.G1Affine) bool {
	for _, v := range vs {
		if parallelConvert(len(v), func(i int) error {
			if !v[i].IsInSubGroup() {
				return errors.New("not in G1")
			}
			return nil
		}) != nil {
			return false
		}
	}
	return true
}

func allInSubGroupG2(vs ...[]curve.G2Affine) bool {
	for _, v := range vs {
		if parallelConvert(len(v), func(i int) error {
			if !v[i].IsInSubGroup() {
				return errors.New("not in G2")
			}
			return nil
		}) != nil {
			return false
		}
	}
	return true
}
