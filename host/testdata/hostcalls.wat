;; hostcalls: calls the functions of the "infernet" host module (those of
;; ABI v1, v3, v5 and v6, abi/abi.go) with arguments read from stdin, for
;; FuzzHostCalls and the v3 tests.
;;
;; stdin (up to 64 KiB) is read into memory at 0 and stays there, so
;; pointers may name any of its bytes. Its first u32 is a count n of
;; 32-byte records, which start at offset 32 (n is clamped to the records
;; read): byte 0 of a record selects the function (modulo 33, in the order
;; below), bytes 4..32 are seven little-endian i32 arguments, of which the
;; function takes the first ones. stdout: each call's i32 result, little
;; endian, then the 256 bytes of memory at 0xff00 (a window for results the
;; calls write). Memory is two pages (128 KiB); the guest itself never traps.
;;
;; Rebuild: wat2wasm -o hostcalls.wasm hostcalls.wat (make -C host/testdata)
(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "infernet" "abi_version" (func $abi_version (result i32)))
  (import "infernet" "mode" (func $mode (result i32)))
  (import "infernet" "tensor_new" (func $tensor_new (param i32 i32 i32) (result i32)))
  (import "infernet" "tensor_free" (func $tensor_free (param i32) (result i32)))
  (import "infernet" "tensor_write" (func $tensor_write (param i32 i32 i32) (result i32)))
  (import "infernet" "tensor_read" (func $tensor_read (param i32 i32 i32) (result i32)))
  (import "infernet" "tensor_dtype" (func $tensor_dtype (param i32) (result i32)))
  (import "infernet" "tensor_shape" (func $tensor_shape (param i32 i32 i32) (result i32)))
  (import "infernet" "tensor_reshape" (func $tensor_reshape (param i32 i32 i32) (result i32)))
  (import "infernet" "gemm" (func $gemm (param i32 i32 i32 i32) (result i32)))
  (import "infernet" "binary" (func $binary (param i32 i32 i32) (result i32)))
  (import "infernet" "unary" (func $unary (param i32 i32) (result i32)))
  (import "infernet" "softmax" (func $softmax (param i32) (result i32)))
  (import "infernet" "reduce" (func $reduce (param i32 i32) (result i32)))
  (import "infernet" "gemm_f32" (func $gemm_f32 (param i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "gemm_i8" (func $gemm_i8 (param i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "binary_f32" (func $binary_f32 (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "unary_f32" (func $unary_f32 (param i32 i32 i32 i32) (result i32)))
  (import "infernet" "softmax_f32" (func $softmax_f32 (param i32 i32 i32 i32) (result i32)))
  (import "infernet" "reduce_f32" (func $reduce_f32 (param i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "tensor_from_data" (func $tensor_from_data (param i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "matmul" (func $matmul (param i32 i32) (result i32)))
  (import "infernet" "embed" (func $embed (param i32 i32 i32) (result i32)))
  (import "infernet" "rmsnorm" (func $rmsnorm (param i32 i32 i32) (result i32)))
  (import "infernet" "rope" (func $rope (param i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "swiglu" (func $swiglu (param i32 i32) (result i32)))
  (import "infernet" "copy_rows" (func $copy_rows (param i32 i32 i32) (result i32)))
  (import "infernet" "attention" (func $attention (param i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "argmax" (func $argmax (param i32) (result i32)))
  (import "infernet" "sample" (func $sample (param i32 i32 i32 i32) (result i32)))
  (import "infernet" "rope_factors" (func $rope_factors (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "matmul_add" (func $matmul_add (param i32 i32 i32) (result i32)))
  (import "infernet" "matmul_swiglu" (func $matmul_swiglu (param i32 i32 i32) (result i32)))
  (memory (export "memory") 2 2)
  ;; 0x10000: iovec; 0x10008: byte count; 0x10010: a function and its result

  ;; dispatch calls function sel (modulo 33) with the first of a0..a6.
  (func $dispatch (param $sel i32) (param $a0 i32) (param $a1 i32) (param $a2 i32)
      (param $a3 i32) (param $a4 i32) (param $a5 i32) (param $a6 i32) (result i32)
    block $f32
    block $f31
    block $f30
    block $f29
    block $f28
    block $f27
    block $f26
    block $f25
    block $f24
    block $f23
    block $f22
    block $f21
    block $f20
    block $f19
    block $f18
    block $f17
    block $f16
    block $f15
    block $f14
    block $f13
    block $f12
    block $f11
    block $f10
    block $f9
    block $f8
    block $f7
    block $f6
    block $f5
    block $f4
    block $f3
    block $f2
    block $f1
    block $f0
      local.get $sel
      i32.const 33
      i32.rem_u
      br_table $f0 $f1 $f2 $f3 $f4 $f5 $f6 $f7 $f8 $f9 $f10 $f11 $f12 $f13 $f14 $f15 $f16 $f17 $f18 $f19
        $f20 $f21 $f22 $f23 $f24 $f25 $f26 $f27 $f28 $f29 $f30 $f31 $f32 $f0
    end ;; $f0
    (return (call $abi_version))
    end ;; $f1
    (return (call $mode))
    end ;; $f2
    (return (call $tensor_new (local.get $a0) (local.get $a1) (local.get $a2)))
    end ;; $f3
    (return (call $tensor_free (local.get $a0)))
    end ;; $f4
    (return (call $tensor_write (local.get $a0) (local.get $a1) (local.get $a2)))
    end ;; $f5
    (return (call $tensor_read (local.get $a0) (local.get $a1) (local.get $a2)))
    end ;; $f6
    (return (call $tensor_dtype (local.get $a0)))
    end ;; $f7
    (return (call $tensor_shape (local.get $a0) (local.get $a1) (local.get $a2)))
    end ;; $f8
    (return (call $tensor_reshape (local.get $a0) (local.get $a1) (local.get $a2)))
    end ;; $f9
    (return (call $gemm (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3)))
    end ;; $f10
    (return (call $binary (local.get $a0) (local.get $a1) (local.get $a2)))
    end ;; $f11
    (return (call $unary (local.get $a0) (local.get $a1)))
    end ;; $f12
    (return (call $softmax (local.get $a0)))
    end ;; $f13
    (return (call $reduce (local.get $a0) (local.get $a1)))
    end ;; $f14
    (return (call $gemm_f32 (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3) (local.get $a4) (local.get $a5) (local.get $a6)))
    end ;; $f15
    (return (call $gemm_i8 (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3) (local.get $a4) (local.get $a5) (local.get $a6)))
    end ;; $f16
    (return (call $binary_f32 (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3) (local.get $a4) (local.get $a5)))
    end ;; $f17
    (return (call $unary_f32 (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3)))
    end ;; $f18
    (return (call $softmax_f32 (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3)))
    end ;; $f19
    (return (call $reduce_f32 (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3) (local.get $a4)))
    end ;; $f20
    (return (call $tensor_from_data (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3) (local.get $a4) (local.get $a5) (local.get $a6)))
    end ;; $f21
    (return (call $matmul (local.get $a0) (local.get $a1)))
    end ;; $f22
    (return (call $embed (local.get $a0) (local.get $a1) (local.get $a2)))
    end ;; $f23
    (return (call $rmsnorm (local.get $a0) (local.get $a1) (local.get $a2)))
    end ;; $f24
    (return (call $rope (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3) (local.get $a4)))
    end ;; $f25
    (return (call $swiglu (local.get $a0) (local.get $a1)))
    end ;; $f26
    (return (call $copy_rows (local.get $a0) (local.get $a1) (local.get $a2)))
    end ;; $f27
    (return (call $attention (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3) (local.get $a4)))
    end ;; $f28
    (return (call $argmax (local.get $a0)))
    end ;; $f29
    (return (call $sample (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3)))
    end ;; $f30
    (return (call $rope_factors (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3)
      (local.get $a4) (local.get $a5)))
    end ;; $f31
    (return (call $matmul_add (local.get $a0) (local.get $a1) (local.get $a2)))
    end ;; $f32
    (return (call $matmul_swiglu (local.get $a0) (local.get $a1) (local.get $a2)))
  )

  (func (export "_start")
    (local $n i32) (local $i i32) (local $rec i32) (local $sel i32) (local $r i32)
    ;; Read stdin into [0, 64 KiB).
    (i32.store (i32.const 0x10000) (i32.const 0))
    (i32.store (i32.const 0x10004) (i32.const 0x10000))
    (drop (call $fd_read (i32.const 0) (i32.const 0x10000) (i32.const 1) (i32.const 0x10008)))
    ;; n = min(count, (read - 32) / 32), 0 if less than a header was read.
    (local.set $n (i32.load (i32.const 0)))
    (if (i32.lt_u (i32.load (i32.const 0x10008)) (i32.const 32))
      (then (local.set $n (i32.const 0)))
      (else
        (if (i32.gt_u (local.get $n) (i32.shr_u (i32.sub (i32.load (i32.const 0x10008)) (i32.const 32)) (i32.const 5)))
          (then (local.set $n (i32.shr_u (i32.sub (i32.load (i32.const 0x10008)) (i32.const 32)) (i32.const 5)))))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $rec (i32.shl (i32.add (local.get $i) (i32.const 1)) (i32.const 5)))
        ;; Each result goes out at once, after the function it answers
        ;; (as read: earlier calls may have written over later records),
        ;; both kept in locals during the call, which may write anywhere.
        (local.set $sel (i32.rem_u (i32.load8_u (local.get $rec)) (i32.const 33)))
        (local.set $r
          (call $dispatch
            (local.get $sel)
            (i32.load offset=4 (local.get $rec))
            (i32.load offset=8 (local.get $rec))
            (i32.load offset=12 (local.get $rec))
            (i32.load offset=16 (local.get $rec))
            (i32.load offset=20 (local.get $rec))
            (i32.load offset=24 (local.get $rec))
            (i32.load offset=28 (local.get $rec))))
        (i32.store (i32.const 0x10010) (local.get $sel))
        (i32.store (i32.const 0x10014) (local.get $r))
        (i32.store (i32.const 0x10000) (i32.const 0x10010))
        (i32.store (i32.const 0x10004) (i32.const 8))
        (drop (call $fd_write (i32.const 1) (i32.const 0x10000) (i32.const 1) (i32.const 0x10008)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    ;; Then the window at 0xff00.
    (i32.store (i32.const 0x10000) (i32.const 0xff00))
    (i32.store (i32.const 0x10004) (i32.const 256))
    (drop (call $fd_write (i32.const 1) (i32.const 0x10000) (i32.const 1) (i32.const 0x10008)))))
