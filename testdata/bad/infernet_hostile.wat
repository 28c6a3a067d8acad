;; infernet_hostile.wat - hostile arguments to every infernet host function.
;;
;; Calls the functions of ABI v1 (abi/abi.go) with pointers outside the
;; module's one page (64 KiB) of memory or misaligned, negative sizes, sizes
;; whose byte counts wrap around 2^32 or 2^64, unknown handles (never created,
;; freed, 0, negative), unknown dtypes, ops and flags, and shapes that do not
;; fit; then exhausts the host tensor memory and the handle table. It prints
;; one line per call to stdout:
;;
;;     <label> want <code> got <code>
;;
;; then "mismatches <n>", and exits 0. Codes are abi.Errno values (-1 EINVAL,
;; -2 EBADF, -3 ESHAPE, -4 EDTYPE, -5 EFAULT, -6 ENOMEM, -7 ETOOMANY). "want
;; neg" accepts any error code, where ABI v1 does not pin one down (mostly the
;; wrapping sizes: what matters is that they are refused); "want pos" is a
;; valid call that must return a handle.
;;
;; The sandbox should answer: no trap, no host crash, no host memory blow-up,
;; exit code 0, output ending in "mismatches 0"; and the tensors the job
;; leaves behind are freed when it ends.
;;
;; The one-shot forms use three valid 16-byte buffers A=1024, B=2048, C=3072.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
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
  (import "infernet" "layernorm_f32" (func $layernorm_f32 (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "softmax_causal_f32" (func $softmax_causal_f32 (param i32 i32 i32 i32) (result i32)))
  (import "infernet" "cross_entropy_f32" (func $cross_entropy_f32 (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "adamw_f32" (func $adamw_f32 (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "gemm_batched_f32" (func $gemm_batched_f32 (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "infernet" "transpose_f32" (func $transpose_f32 (param i32 i32 i32 i32) (result i32)))
  (import "infernet" "gather_f32" (func $gather_f32 (param i32 i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)

  ;; ---- Output helpers -------------------------------------------------------
  ;; Memory layout: [0,8) iovec, [8,12) nwritten, [16,48) number buffer,
  ;; [64,128) fixed strings, [0x8000, 0x10000) one 64-byte slot per label.
  (data (i32.const 64) " want ")
  (data (i32.const 72) " got ")
  (data (i32.const 80) "neg")
  (data (i32.const 84) "pos")
  (data (i32.const 88) "\n")
  (data (i32.const 92) "any")
  (data (i32.const 96) "mismatches ")

  (global $mismatches (mut i32) (i32.const 0))

  ;; write writes memory[ptr, ptr+len) to stdout, ignoring errors.
  (func $write (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0) (local.get $ptr))
    (i32.store (i32.const 4) (local.get $len))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))

  ;; print_cstr writes the NUL-terminated string at ptr.
  (func $print_cstr (param $ptr i32)
    (local $end i32)
    (local.set $end (local.get $ptr))
    (block $done
      (loop $scan
        (br_if $done (i32.eqz (i32.load8_u (local.get $end))))
        (local.set $end (i32.add (local.get $end) (i32.const 1)))
        (br $scan)))
    (call $write (local.get $ptr) (i32.sub (local.get $end) (local.get $ptr))))

  ;; print_num writes v in signed decimal.
  (func $print_num (param $v i32)
    (local $p i32) (local $u i32)
    (local.set $p (i32.const 48))
    ;; |v| as an unsigned number (0 - INT_MIN wraps to 2^31, which is right).
    (local.set $u (select (i32.sub (i32.const 0) (local.get $v)) (local.get $v)
                          (i32.lt_s (local.get $v) (i32.const 0))))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.rem_u (local.get $u) (i32.const 10))))
      (local.set $u (i32.div_u (local.get $u) (i32.const 10)))
      (br_if $digit (local.get $u)))
    (if (i32.lt_s (local.get $v) (i32.const 0))
      (then
        (local.set $p (i32.sub (local.get $p) (i32.const 1)))
        (i32.store8 (local.get $p) (i32.const 45))))
    (call $write (local.get $p) (i32.sub (i32.const 48) (local.get $p))))

  ;; check prints "<label> want <want> got <got>" and counts a mismatch if got
  ;; is not what was wanted; it returns got. want is a code, or 1000 for
  ;; "any error (negative)", or 1001 for "a positive value" (a handle, printed as
  ;; "pos" so that the output does not depend on how the host numbers them),
  ;; or 1002 for "any answer" (the call only has to return).
  (func $check (param $label i32) (param $want i32) (param $got i32) (result i32)
    (local $ok i32)
    (local.set $ok
      (if (result i32) (i32.eq (local.get $want) (i32.const 1000))
        (then (i32.lt_s (local.get $got) (i32.const 0)))
        (else
          (if (result i32) (i32.eq (local.get $want) (i32.const 1001))
            (then (i32.gt_s (local.get $got) (i32.const 0)))
            (else
              (i32.or (i32.eq (local.get $want) (i32.const 1002))
                      (i32.eq (local.get $got) (local.get $want))))))))
    (call $print_cstr (local.get $label))
    (call $write (i32.const 64) (i32.const 6))
    (if (i32.eq (local.get $want) (i32.const 1000))
      (then (call $write (i32.const 80) (i32.const 3)))
      (else
        (if (i32.eq (local.get $want) (i32.const 1001))
          (then (call $write (i32.const 84) (i32.const 3)))
          (else
            (if (i32.eq (local.get $want) (i32.const 1002))
              (then (call $write (i32.const 92) (i32.const 3)))
              (else (call $print_num (local.get $want))))))))
    (call $write (i32.const 72) (i32.const 5))
    (if (i32.and (i32.eq (local.get $want) (i32.const 1001)) (local.get $ok))
      (then (call $write (i32.const 84) (i32.const 3)))
      (else (call $print_num (local.get $got))))
    (call $write (i32.const 88) (i32.const 1))
    (if (i32.eqz (local.get $ok))
      (then (global.set $mismatches (i32.add (global.get $mismatches) (i32.const 1)))))
    (local.get $got))

  ;; summary prints "mismatches <n>".
  (func $summary
    (call $write (i32.const 96) (i32.const 11))
    (call $print_num (global.get $mismatches))
    (call $write (i32.const 88) (i32.const 1)))


  ;; ---- Shapes (little-endian i32 dims) ------------------------------------------
  (data (i32.const 256) "\02\00\00\00\02\00\00\00")  ;; [2,2]
  (data (i32.const 264) "\02\00\00\00\03\00\00\00")  ;; [2,3]
  (data (i32.const 272) "\04\00\00\00")  ;; [4]
  (data (i32.const 276) "\03\00\00\00")  ;; [3]
  (data (i32.const 280) "\02\00\00\00\fe\ff\ff\ff")  ;; [2,-2]
  (data (i32.const 288) "\01\00\00\40\04\00\00\00")  ;; [0x40000001,4]: 2^32+4 elements, 4 mod 2^32
  (data (i32.const 296) "\01\00\00\40")  ;; [0x40000001]: as f32, 2^32+4 bytes, 4 mod 2^32
  (data (i32.const 300) "\04\00\00\00\19\5b\1d\00\95\44\e3\02\45\c1\00\00")  ;; [4,1923865,48448661,49477]: 2^64+4 elements
  (data (i32.const 316) "\19\5b\1d\00\95\44\e3\02\45\c1\00\00")  ;; [1923865,48448661,49477]: 2^62+1 elements, as f32 2^64+4 bytes
  (data (i32.const 328) "\ff\ff\ff\7f\ff\ff\ff\7f")  ;; [2^31-1,2^31-1]
  (data (i32.const 336) "\ff\ff\ff\ff\fc\ff\ff\ff")  ;; [-1,-4]: product 4, like [2,2]
  (data (i32.const 344) "\00\20\00\00\00\20\00\00")  ;; [8192,8192]: 256 MiB as f32
  (data (i32.const 352) "\01\00\00\00")  ;; [1]
  (data (i32.const 356) "\01\00\00\00\01\00\00\00\01\00\00\00\01\00\00\00\01\00\00\00\01\00\00\00\01\00\00\00\01\00\00\00\01\00\00\00")  ;; [1,1,1,1,1,1,1,1,1]: 9 dims
  ;; ---- Data for the one-shot forms ----------------------------------------------
  (data (i32.const 1024) "\00\00\80\3f\00\00\00\40\00\00\40\40\00\00\80\40")  ;; A = 1, 2, 3, 4
  (data (i32.const 2048) "\00\00\80\3f\00\00\80\3f\00\00\80\3f\00\00\80\3f")  ;; B = 1, 1, 1, 1
  ;; ---- Tensors made by the setup calls ------------------------------------------
  (global $f22 (mut i32) (i32.const 0))  ;; f32 [2,2]
  (global $f23 (mut i32) (i32.const 0))  ;; f32 [2,3]
  (global $f3 (mut i32) (i32.const 0))   ;; f32 [3]
  (global $i8 (mut i32) (i32.const 0))   ;; i8 [2,2]
  (global $i32 (mut i32) (i32.const 0))  ;; i32 [2,2]
  (global $dead (mut i32) (i32.const 0)) ;; freed right after it is made

  ;; free_if_pos frees the tensor made by a call that returned a handle.
  (func $free_if_pos (param $h i32)
    (if (i32.gt_s (local.get $h) (i32.const 0))
      (then (drop (call $tensor_free (local.get $h))))))

  ;; ---- Labels, one 64-byte slot each ----------------------------------------
  (data (i32.const 0x8000) "abi_version\00")
  (data (i32.const 0x8040) "setup.f22\00")
  (data (i32.const 0x8080) "setup.f23\00")
  (data (i32.const 0x80c0) "setup.f3\00")
  (data (i32.const 0x8100) "setup.i8\00")
  (data (i32.const 0x8140) "setup.i32\00")
  (data (i32.const 0x8180) "setup.dead\00")
  (data (i32.const 0x81c0) "setup.free_dead\00")
  (data (i32.const 0x8200) "gemm_f32.ok\00")
  (data (i32.const 0x8240) "gemm_f32.a_past_end\00")
  (data (i32.const 0x8280) "gemm_f32.a_crosses_end\00")
  (data (i32.const 0x82c0) "gemm_f32.b_at_end\00")
  (data (i32.const 0x8300) "gemm_f32.c_crosses_end\00")
  (data (i32.const 0x8340) "gemm_f32.a_misaligned\00")
  (data (i32.const 0x8380) "gemm_f32.c_misaligned\00")
  (data (i32.const 0x83c0) "gemm_f32.a_negative\00")
  (data (i32.const 0x8400) "gemm_f32.m_negative\00")
  (data (i32.const 0x8440) "gemm_f32.k_min_int\00")
  (data (i32.const 0x8480) "gemm_f32.flags_unknown\00")
  (data (i32.const 0x84c0) "gemm_f32.flags_all\00")
  (data (i32.const 0x8500) "gemm_f32.size_wraps_u32\00")
  (data (i32.const 0x8540) "gemm_f32.size_max\00")
  (data (i32.const 0x8580) "gemm_i8.ok\00")
  (data (i32.const 0x85c0) "gemm_i8.a_crosses_end\00")
  (data (i32.const 0x8600) "gemm_i8.c_past_end\00")
  (data (i32.const 0x8640) "gemm_i8.c_misaligned\00")
  (data (i32.const 0x8680) "gemm_i8.n_negative\00")
  (data (i32.const 0x86c0) "gemm_i8.flags_unknown\00")
  (data (i32.const 0x8700) "gemm_i8.size_wraps_u32\00")
  (data (i32.const 0x8740) "binary_f32.ok\00")
  (data (i32.const 0x8780) "binary_f32.op_zero\00")
  (data (i32.const 0x87c0) "binary_f32.op_unknown\00")
  (data (i32.const 0x8800) "binary_f32.nb_not_divisor\00")
  (data (i32.const 0x8840) "binary_f32.nb_zero\00")
  (data (i32.const 0x8880) "binary_f32.n_negative\00")
  (data (i32.const 0x88c0) "binary_f32.a_past_end\00")
  (data (i32.const 0x8900) "binary_f32.b_misaligned\00")
  (data (i32.const 0x8940) "binary_f32.out_crosses_end\00")
  (data (i32.const 0x8980) "binary_f32.size_wraps_u32\00")
  (data (i32.const 0x89c0) "unary_f32.ok\00")
  (data (i32.const 0x8a00) "unary_f32.op_zero\00")
  (data (i32.const 0x8a40) "unary_f32.op_unknown\00")
  (data (i32.const 0x8a80) "unary_f32.n_negative\00")
  (data (i32.const 0x8ac0) "unary_f32.a_at_end\00")
  (data (i32.const 0x8b00) "unary_f32.out_misaligned\00")
  (data (i32.const 0x8b40) "unary_f32.size_wraps_u32\00")
  (data (i32.const 0x8b80) "softmax_f32.ok\00")
  (data (i32.const 0x8bc0) "softmax_f32.rows_negative\00")
  (data (i32.const 0x8c00) "softmax_f32.cols_negative\00")
  (data (i32.const 0x8c40) "softmax_f32.a_crosses_end\00")
  (data (i32.const 0x8c80) "softmax_f32.out_misaligned\00")
  (data (i32.const 0x8cc0) "softmax_f32.size_wraps_u32\00")
  (data (i32.const 0x8d00) "reduce_f32.ok\00")
  (data (i32.const 0x8d40) "reduce_f32.op_zero\00")
  (data (i32.const 0x8d80) "reduce_f32.op_unknown\00")
  (data (i32.const 0x8dc0) "reduce_f32.rows_negative\00")
  (data (i32.const 0x8e00) "reduce_f32.out_at_end\00")
  (data (i32.const 0x8e40) "reduce_f32.size_wraps_u32\00")
  (data (i32.const 0x8e80) "tensor_new.dtype_zero\00")
  (data (i32.const 0x8ec0) "tensor_new.dtype_unknown\00")
  (data (i32.const 0x8f00) "tensor_new.dtype_negative\00")
  (data (i32.const 0x8f40) "tensor_new.ndim_zero\00")
  (data (i32.const 0x8f80) "tensor_new.ndim_9\00")
  (data (i32.const 0x8fc0) "tensor_new.ndim_negative\00")
  (data (i32.const 0x9000) "tensor_new.ndim_huge\00")
  (data (i32.const 0x9040) "tensor_new.dims_past_end\00")
  (data (i32.const 0x9080) "tensor_new.dims_cross_end\00")
  (data (i32.const 0x90c0) "tensor_new.dim_negative\00")
  (data (i32.const 0x9100) "tensor_new.dims_two_negative\00")
  (data (i32.const 0x9140) "tensor_new.count_wraps_u32\00")
  (data (i32.const 0x9180) "tensor_new.bytes_wraps_u32\00")
  (data (i32.const 0x91c0) "tensor_new.count_wraps_u64\00")
  (data (i32.const 0x9200) "tensor_new.bytes_wraps_u64\00")
  (data (i32.const 0x9240) "tensor_new.too_large\00")
  (data (i32.const 0x9280) "tensor_free.zero\00")
  (data (i32.const 0x92c0) "tensor_free.negative\00")
  (data (i32.const 0x9300) "tensor_free.min_int\00")
  (data (i32.const 0x9340) "tensor_free.unknown\00")
  (data (i32.const 0x9380) "tensor_free.twice\00")
  (data (i32.const 0x93c0) "tensor_write.ok\00")
  (data (i32.const 0x9400) "tensor_write.stale\00")
  (data (i32.const 0x9440) "tensor_write.ptr_past_end\00")
  (data (i32.const 0x9480) "tensor_write.ptr_crosses_end\00")
  (data (i32.const 0x94c0) "tensor_write.len_short\00")
  (data (i32.const 0x9500) "tensor_write.len_long\00")
  (data (i32.const 0x9540) "tensor_write.len_negative\00")
  (data (i32.const 0x9580) "tensor_read.ok\00")
  (data (i32.const 0x95c0) "tensor_read.stale\00")
  (data (i32.const 0x9600) "tensor_read.ptr_past_end\00")
  (data (i32.const 0x9640) "tensor_read.ptr_crosses_end\00")
  (data (i32.const 0x9680) "tensor_read.ptr_negative\00")
  (data (i32.const 0x96c0) "tensor_read.len_short\00")
  (data (i32.const 0x9700) "tensor_read.len_huge\00")
  (data (i32.const 0x9740) "tensor_dtype.ok\00")
  (data (i32.const 0x9780) "tensor_dtype.zero\00")
  (data (i32.const 0x97c0) "tensor_dtype.stale\00")
  (data (i32.const 0x9800) "tensor_shape.ok\00")
  (data (i32.const 0x9840) "tensor_shape.stale\00")
  (data (i32.const 0x9880) "tensor_shape.dims_past_end\00")
  (data (i32.const 0x98c0) "tensor_shape.dims_cross_end\00")
  (data (i32.const 0x9900) "tensor_shape.max_ndim_negative\00")
  (data (i32.const 0x9940) "gemm.ok\00")
  (data (i32.const 0x9980) "gemm.into_ok\00")
  (data (i32.const 0x99c0) "gemm.stale_a\00")
  (data (i32.const 0x9a00) "gemm.unknown_b\00")
  (data (i32.const 0x9a40) "gemm.negative_c\00")
  (data (i32.const 0x9a80) "gemm.mixed_dtypes\00")
  (data (i32.const 0x9ac0) "gemm.i32_inputs\00")
  (data (i32.const 0x9b00) "gemm.k_mismatch\00")
  (data (i32.const 0x9b40) "gemm.c_wrong_shape\00")
  (data (i32.const 0x9b80) "gemm.c_wrong_dtype\00")
  (data (i32.const 0x9bc0) "gemm.flags_unknown\00")
  (data (i32.const 0x9c00) "gemm.one_dim\00")
  (data (i32.const 0x9c40) "gemm.accumulate_without_c\00")
  (data (i32.const 0x9c80) "gemm.c_is_input\00")
  (data (i32.const 0x9cc0) "binary.ok\00")
  (data (i32.const 0x9d00) "binary.op_zero\00")
  (data (i32.const 0x9d40) "binary.op_unknown\00")
  (data (i32.const 0x9d80) "binary.stale\00")
  (data (i32.const 0x9dc0) "binary.not_suffix\00")
  (data (i32.const 0x9e00) "binary.b_larger\00")
  (data (i32.const 0x9e40) "binary.i8\00")
  (data (i32.const 0x9e80) "binary.mixed\00")
  (data (i32.const 0x9ec0) "binary.i32_mul\00")
  (data (i32.const 0x9f00) "unary.ok\00")
  (data (i32.const 0x9f40) "unary.op_zero\00")
  (data (i32.const 0x9f80) "unary.op_unknown\00")
  (data (i32.const 0x9fc0) "unary.stale\00")
  (data (i32.const 0xa000) "unary.i32\00")
  (data (i32.const 0xa040) "softmax.ok\00")
  (data (i32.const 0xa080) "softmax.stale\00")
  (data (i32.const 0xa0c0) "softmax.i8\00")
  (data (i32.const 0xa100) "reduce.ok\00")
  (data (i32.const 0xa140) "reduce.op_zero\00")
  (data (i32.const 0xa180) "reduce.op_unknown\00")
  (data (i32.const 0xa1c0) "reduce.stale\00")
  (data (i32.const 0xa200) "reduce.i32\00")
  (data (i32.const 0xa240) "tensor_reshape.ok\00")
  (data (i32.const 0xa280) "tensor_reshape.ok_back\00")
  (data (i32.const 0xa2c0) "tensor_reshape.stale\00")
  (data (i32.const 0xa300) "tensor_reshape.ndim_zero\00")
  (data (i32.const 0xa340) "tensor_reshape.ndim_9\00")
  (data (i32.const 0xa380) "tensor_reshape.dims_past_end\00")
  (data (i32.const 0xa3c0) "tensor_reshape.count_differs\00")
  (data (i32.const 0xa400) "tensor_reshape.two_negative\00")
  (data (i32.const 0xa440) "tensor_reshape.count_wraps_u32\00")
  (data (i32.const 0xa480) "tensor_reshape.count_wraps_u64\00")
  (data (i32.const 0xa4c0) "tensor_reshape.still_2x2\00")
  (data (i32.const 0xa500) "exhaust.tensor_memory\00")
  (data (i32.const 0xa540) "exhaust.handles\00")
  (data (i32.const 0xa580) "unary_f32.v2_ops\00")
  (data (i32.const 0xa5c0) "layernorm_f32.ok\00")
  (data (i32.const 0xa600) "layernorm_f32.g_at_end\00")
  (data (i32.const 0xa640) "layernorm_f32.cols_zero\00")
  (data (i32.const 0xa680) "softmax_causal_f32.ok\00")
  (data (i32.const 0xa6c0) "softmax_causal_f32.rows_not_blocks\00")
  (data (i32.const 0xa700) "cross_entropy_f32.ok\00")
  (data (i32.const 0xa740) "cross_entropy_f32.target_out_of_range\00")
  (data (i32.const 0xa780) "cross_entropy_f32.targets_at_end\00")
  (data (i32.const 0xa7c0) "adamw_f32.ok\00")
  (data (i32.const 0xa800) "adamw_f32.step_zero\00")
  (data (i32.const 0xa840) "gemm_batched_f32.ok\00")
  (data (i32.const 0xa880) "gemm_batched_f32.c_at_end\00")
  (data (i32.const 0xa8c0) "gemm_batched_f32.batch_zero\00")
  (data (i32.const 0xa900) "transpose_f32.ok\00")
  (data (i32.const 0xa940) "gather_f32.ok\00")
  (data (i32.const 0xa980) "gather_f32.index_out_of_range\00")
  ;; AdamW hyper-parameters: lr 0.001, beta1 0.9, beta2 0.999, eps 1e-8, decay 0.01, step 1;
  ;; then the same with step 0
  (data (i32.const 0x3c00) "\6f\12\83\3a\66\66\66\3f\77\be\7f\3f\77\cc\2b\32\0a\d7\23\3c\00\00\80\3f")
  (data (i32.const 0x3c20) "\6f\12\83\3a\66\66\66\3f\77\be\7f\3f\77\cc\2b\32\0a\d7\23\3c\00\00\00\00")

  (func (export "_start") (local $i i32) (local $h i32)
    ;; ---- Setup ------------------------------------------------------------------
    ;; abi_version: the version (abi.Version), as a sanity check
    (drop (call $check (i32.const 0x8000) (i32.const 8)
      (call $abi_version)))
    ;; setup.f22: f32 [2,2]
    (global.set $f22 (call $check (i32.const 0x8040) (i32.const 1001)
      (call $tensor_new (i32.const 1) (i32.const 2) (i32.const 256))))
    ;; setup.f23: f32 [2,3]
    (global.set $f23 (call $check (i32.const 0x8080) (i32.const 1001)
      (call $tensor_new (i32.const 1) (i32.const 2) (i32.const 264))))
    ;; setup.f3: f32 [3]
    (global.set $f3 (call $check (i32.const 0x80c0) (i32.const 1001)
      (call $tensor_new (i32.const 1) (i32.const 1) (i32.const 276))))
    ;; setup.i8: i8 [2,2]
    (global.set $i8 (call $check (i32.const 0x8100) (i32.const 1001)
      (call $tensor_new (i32.const 2) (i32.const 2) (i32.const 256))))
    ;; setup.i32: i32 [2,2]
    (global.set $i32 (call $check (i32.const 0x8140) (i32.const 1001)
      (call $tensor_new (i32.const 3) (i32.const 2) (i32.const 256))))
    ;; setup.dead: a tensor to free
    (global.set $dead (call $check (i32.const 0x8180) (i32.const 1001)
      (call $tensor_new (i32.const 1) (i32.const 2) (i32.const 256))))
    ;; setup.free_dead: free it: from now on $dead is a stale handle
    (drop (call $check (i32.const 0x81c0) (i32.const 0)
      (call $tensor_free (global.get $dead))))
    ;; ---- gemm_f32 ---------------------------------------------------------------
    ;; gemm_f32.ok: valid 2x2x2 product
    (drop (call $check (i32.const 0x8200) (i32.const 0)
      (call $gemm_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 2048) (i32.const 3072) (i32.const 0))))
    ;; gemm_f32.a_past_end: A starts past the end of memory
    (drop (call $check (i32.const 0x8240) (i32.const -5)
      (call $gemm_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 0xFFFFFFF0) (i32.const 2048) (i32.const 3072) (i32.const 0))))
    ;; gemm_f32.a_crosses_end: A (16 bytes) starts 8 bytes before the end
    (drop (call $check (i32.const 0x8280) (i32.const -5)
      (call $gemm_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 65528) (i32.const 2048) (i32.const 3072) (i32.const 0))))
    ;; gemm_f32.b_at_end: B starts exactly at the end
    (drop (call $check (i32.const 0x82c0) (i32.const -5)
      (call $gemm_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 65536) (i32.const 3072) (i32.const 0))))
    ;; gemm_f32.c_crosses_end: C (16 bytes) starts 4 bytes before the end
    (drop (call $check (i32.const 0x8300) (i32.const -5)
      (call $gemm_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 2048) (i32.const 65532) (i32.const 0))))
    ;; gemm_f32.a_misaligned: A not 4-byte aligned
    (drop (call $check (i32.const 0x8340) (i32.const -5)
      (call $gemm_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1025) (i32.const 2048) (i32.const 3072) (i32.const 0))))
    ;; gemm_f32.c_misaligned: C not 4-byte aligned
    (drop (call $check (i32.const 0x8380) (i32.const -5)
      (call $gemm_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 2048) (i32.const 3074) (i32.const 0))))
    ;; gemm_f32.a_negative: A = -4, i.e. 0xFFFFFFFC
    (drop (call $check (i32.const 0x83c0) (i32.const -5)
      (call $gemm_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const -4) (i32.const 2048) (i32.const 3072) (i32.const 0))))
    ;; gemm_f32.m_negative: m = -1
    (drop (call $check (i32.const 0x8400) (i32.const -1)
      (call $gemm_f32 (i32.const -1) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 2048) (i32.const 3072) (i32.const 0))))
    ;; gemm_f32.k_min_int: k = -2^31
    (drop (call $check (i32.const 0x8440) (i32.const -1)
      (call $gemm_f32 (i32.const 2) (i32.const 2) (i32.const 0x80000000) (i32.const 1024) (i32.const 2048) (i32.const 3072) (i32.const 0))))
    ;; gemm_f32.flags_unknown: flag bit 3 is not defined
    (drop (call $check (i32.const 0x8480) (i32.const -1)
      (call $gemm_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 2048) (i32.const 3072) (i32.const 8))))
    ;; gemm_f32.flags_all: every flag bit set
    (drop (call $check (i32.const 0x84c0) (i32.const -1)
      (call $gemm_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 2048) (i32.const 3072) (i32.const -1))))
    ;; gemm_f32.size_wraps_u32: m=n=k=2^16: each matrix is 2^34 bytes, 0 mod 2^32
    (drop (call $check (i32.const 0x8500) (i32.const 1000)
      (call $gemm_f32 (i32.const 65536) (i32.const 65536) (i32.const 65536) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))))
    ;; gemm_f32.size_max: m=n=k=2^31-1 at address 0
    (drop (call $check (i32.const 0x8540) (i32.const 1000)
      (call $gemm_f32 (i32.const 0x7FFFFFFF) (i32.const 0x7FFFFFFF) (i32.const 0x7FFFFFFF) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))))
    ;; ---- gemm_i8 ----------------------------------------------------------------
    ;; gemm_i8.ok: valid 2x2x2 product (A and B are i8, C is i32)
    (drop (call $check (i32.const 0x8580) (i32.const 0)
      (call $gemm_i8 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 2048) (i32.const 3072) (i32.const 0))))
    ;; gemm_i8.a_crosses_end: A (4 bytes) starts 1 byte before the end
    (drop (call $check (i32.const 0x85c0) (i32.const -5)
      (call $gemm_i8 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 65535) (i32.const 2048) (i32.const 3072) (i32.const 0))))
    ;; gemm_i8.c_past_end: C starts past the end
    (drop (call $check (i32.const 0x8600) (i32.const -5)
      (call $gemm_i8 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 2048) (i32.const 0xFFFFFFF0) (i32.const 0))))
    ;; gemm_i8.c_misaligned: C (i32) not 4-byte aligned; A and B (i8) need no alignment
    (drop (call $check (i32.const 0x8640) (i32.const -5)
      (call $gemm_i8 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1025) (i32.const 2051) (i32.const 3073) (i32.const 0))))
    ;; gemm_i8.n_negative: n = -2
    (drop (call $check (i32.const 0x8680) (i32.const -1)
      (call $gemm_i8 (i32.const 2) (i32.const -2) (i32.const 2) (i32.const 1024) (i32.const 2048) (i32.const 3072) (i32.const 0))))
    ;; gemm_i8.flags_unknown: flag bit 4 is not defined
    (drop (call $check (i32.const 0x86c0) (i32.const -1)
      (call $gemm_i8 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 2048) (i32.const 3072) (i32.const 16))))
    ;; gemm_i8.size_wraps_u32: m=n=k=2^16: A and B are 2^32 bytes, C 2^34, all 0 mod 2^32
    (drop (call $check (i32.const 0x8700) (i32.const 1000)
      (call $gemm_i8 (i32.const 65536) (i32.const 65536) (i32.const 65536) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))))
    ;; ---- binary_f32 -------------------------------------------------------------
    ;; binary_f32.ok: out[0..4) = A + B[i%2]
    (drop (call $check (i32.const 0x8740) (i32.const 0)
      (call $binary_f32 (i32.const 1) (i32.const 1024) (i32.const 4) (i32.const 2048) (i32.const 2) (i32.const 3072))))
    ;; binary_f32.op_zero: op 0
    (drop (call $check (i32.const 0x8780) (i32.const -1)
      (call $binary_f32 (i32.const 0) (i32.const 1024) (i32.const 4) (i32.const 2048) (i32.const 2) (i32.const 3072))))
    ;; binary_f32.op_unknown: op 5
    (drop (call $check (i32.const 0x87c0) (i32.const -1)
      (call $binary_f32 (i32.const 5) (i32.const 1024) (i32.const 4) (i32.const 2048) (i32.const 2) (i32.const 3072))))
    ;; binary_f32.nb_not_divisor: nb = 3 does not divide n = 4
    (drop (call $check (i32.const 0x8800) (i32.const -3)
      (call $binary_f32 (i32.const 1) (i32.const 1024) (i32.const 4) (i32.const 2048) (i32.const 3) (i32.const 3072))))
    ;; binary_f32.nb_zero: nb = 0
    (drop (call $check (i32.const 0x8840) (i32.const 1000)
      (call $binary_f32 (i32.const 1) (i32.const 1024) (i32.const 4) (i32.const 2048) (i32.const 0) (i32.const 3072))))
    ;; binary_f32.n_negative: n = -4 (nb = 2 'divides' it)
    (drop (call $check (i32.const 0x8880) (i32.const -1)
      (call $binary_f32 (i32.const 1) (i32.const 1024) (i32.const -4) (i32.const 2048) (i32.const 2) (i32.const 3072))))
    ;; binary_f32.a_past_end: a starts past the end
    (drop (call $check (i32.const 0x88c0) (i32.const -5)
      (call $binary_f32 (i32.const 1) (i32.const 0xFFFFFFF0) (i32.const 4) (i32.const 2048) (i32.const 2) (i32.const 3072))))
    ;; binary_f32.b_misaligned: b not 4-byte aligned
    (drop (call $check (i32.const 0x8900) (i32.const -5)
      (call $binary_f32 (i32.const 1) (i32.const 1024) (i32.const 4) (i32.const 2049) (i32.const 2) (i32.const 3072))))
    ;; binary_f32.out_crosses_end: out (16 bytes) starts 8 bytes before the end
    (drop (call $check (i32.const 0x8940) (i32.const -5)
      (call $binary_f32 (i32.const 1) (i32.const 1024) (i32.const 4) (i32.const 2048) (i32.const 2) (i32.const 65528))))
    ;; binary_f32.size_wraps_u32: n = nb = 2^30: 2^32 bytes each, 0 mod 2^32
    (drop (call $check (i32.const 0x8980) (i32.const 1000)
      (call $binary_f32 (i32.const 1) (i32.const 0) (i32.const 0x40000000) (i32.const 0) (i32.const 0x40000000) (i32.const 0))))
    ;; ---- unary_f32 --------------------------------------------------------------
    ;; unary_f32.ok: GELU of A
    (drop (call $check (i32.const 0x89c0) (i32.const 0)
      (call $unary_f32 (i32.const 2) (i32.const 1024) (i32.const 4) (i32.const 3072))))
    ;; unary_f32.v2_ops: exp, log, tanh, sqrt (ABI v2) all answer 0
    (drop (call $check (i32.const 0xa580) (i32.const 0)
      (i32.or (i32.or (call $unary_f32 (i32.const 3) (i32.const 1024) (i32.const 4) (i32.const 3072))
                      (call $unary_f32 (i32.const 4) (i32.const 1024) (i32.const 4) (i32.const 3072)))
              (i32.or (call $unary_f32 (i32.const 5) (i32.const 1024) (i32.const 4) (i32.const 3072))
                      (call $unary_f32 (i32.const 6) (i32.const 1024) (i32.const 4) (i32.const 3072))))))
    ;; layernorm_f32.ok: a row of 4 (A), scaled and shifted by A itself (ABI v2)
    (drop (call $check (i32.const 0xa5c0) (i32.const 0)
      (call $layernorm_f32 (i32.const 1) (i32.const 4) (i32.const 1024) (i32.const 1024) (i32.const 1024) (i32.const 3072))))
    ;; layernorm_f32.g_at_end: g's 4 elements run past the end of memory
    (drop (call $check (i32.const 0xa600) (i32.const -5)
      (call $layernorm_f32 (i32.const 1) (i32.const 4) (i32.const 1024) (i32.const 65532) (i32.const 1024) (i32.const 3072))))
    ;; layernorm_f32.cols_zero
    (drop (call $check (i32.const 0xa640) (i32.const -1)
      (call $layernorm_f32 (i32.const 1) (i32.const 0) (i32.const 1024) (i32.const 1024) (i32.const 1024) (i32.const 3072))))
    ;; softmax_causal_f32.ok: A as a 2x2 block (ABI v2)
    (drop (call $check (i32.const 0xa680) (i32.const 0)
      (call $softmax_causal_f32 (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 3072))))
    ;; softmax_causal_f32.rows_not_blocks: 3 rows are no blocks of 2
    (drop (call $check (i32.const 0xa6c0) (i32.const -3)
      (call $softmax_causal_f32 (i32.const 3) (i32.const 2) (i32.const 1024) (i32.const 3072))))
    ;; cross_entropy_f32.ok: 2 rows of 2 logits (A), targets 0 and 0 (the zero
    ;; page at 0x3000), loss at 0x3400, gradient at 0x3800
    (drop (call $check (i32.const 0xa700) (i32.const 0)
      (call $cross_entropy_f32 (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 0x3000) (i32.const 0x3400) (i32.const 0x3800))))
    ;; cross_entropy_f32.target_out_of_range: A's bits as targets
    (drop (call $check (i32.const 0xa740) (i32.const -1)
      (call $cross_entropy_f32 (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 1024) (i32.const 0x3400) (i32.const 0x3800))))
    ;; cross_entropy_f32.targets_at_end: the targets run past the end of memory
    (drop (call $check (i32.const 0xa780) (i32.const -5)
      (call $cross_entropy_f32 (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 65532) (i32.const 0x3400) (i32.const 0x3800))))
    ;; adamw_f32.ok: 4 parameters at 0x3400, gradients A, moments at 0x3800 and 0x3810
    (drop (call $check (i32.const 0xa7c0) (i32.const 0)
      (call $adamw_f32 (i32.const 4) (i32.const 0x3400) (i32.const 1024) (i32.const 0x3800) (i32.const 0x3810) (i32.const 0x3c00))))
    ;; adamw_f32.step_zero: steps count from 1
    (drop (call $check (i32.const 0xa800) (i32.const -1)
      (call $adamw_f32 (i32.const 4) (i32.const 0x3400) (i32.const 1024) (i32.const 0x3800) (i32.const 0x3810) (i32.const 0x3c20))))
    ;; gemm_batched_f32.ok: 2 products of 1x1 by 1x2 (A's 4 floats as both operands' halves)
    (drop (call $check (i32.const 0xa840) (i32.const 0)
      (call $gemm_batched_f32 (i32.const 2) (i32.const 1) (i32.const 2) (i32.const 1) (i32.const 1024) (i32.const 1024) (i32.const 0x3400) (i32.const 0))))
    ;; gemm_batched_f32.c_at_end: the second C runs past the end of memory
    (drop (call $check (i32.const 0xa880) (i32.const -5)
      (call $gemm_batched_f32 (i32.const 2) (i32.const 1) (i32.const 2) (i32.const 1) (i32.const 1024) (i32.const 1024) (i32.const 65528) (i32.const 0))))
    ;; gemm_batched_f32.batch_zero
    (drop (call $check (i32.const 0xa8c0) (i32.const -1)
      (call $gemm_batched_f32 (i32.const 0) (i32.const 1) (i32.const 2) (i32.const 1) (i32.const 1024) (i32.const 1024) (i32.const 0x3400) (i32.const 0))))
    ;; transpose_f32.ok: A as 2x2
    (drop (call $check (i32.const 0xa900) (i32.const 0)
      (call $transpose_f32 (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 0x3400))))
    ;; gather_f32.ok: rows 0 and 0 (the zero page at 0x3000) of A as a 2x2 table
    (drop (call $check (i32.const 0xa940) (i32.const 0)
      (call $gather_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 0x3000) (i32.const 0x3400))))
    ;; gather_f32.index_out_of_range: A's bits as indices
    (drop (call $check (i32.const 0xa980) (i32.const -1)
      (call $gather_f32 (i32.const 2) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 1024) (i32.const 0x3400))))
    ;; unary_f32.op_zero: op 0
    (drop (call $check (i32.const 0x8a00) (i32.const -1)
      (call $unary_f32 (i32.const 0) (i32.const 1024) (i32.const 4) (i32.const 3072))))
    ;; unary_f32.op_unknown: op 7 (ABI v2 ends at 6, sqrt)
    (drop (call $check (i32.const 0x8a40) (i32.const -1)
      (call $unary_f32 (i32.const 7) (i32.const 1024) (i32.const 4) (i32.const 3072))))
    ;; unary_f32.n_negative: n = -1
    (drop (call $check (i32.const 0x8a80) (i32.const -1)
      (call $unary_f32 (i32.const 1) (i32.const 1024) (i32.const -1) (i32.const 3072))))
    ;; unary_f32.a_at_end: a starts exactly at the end
    (drop (call $check (i32.const 0x8ac0) (i32.const -5)
      (call $unary_f32 (i32.const 1) (i32.const 65536) (i32.const 4) (i32.const 3072))))
    ;; unary_f32.out_misaligned: out not 4-byte aligned
    (drop (call $check (i32.const 0x8b00) (i32.const -5)
      (call $unary_f32 (i32.const 1) (i32.const 1024) (i32.const 4) (i32.const 3075))))
    ;; unary_f32.size_wraps_u32: n = 2^30: 2^32 bytes, 0 mod 2^32
    (drop (call $check (i32.const 0x8b40) (i32.const 1000)
      (call $unary_f32 (i32.const 1) (i32.const 0) (i32.const 0x40000000) (i32.const 0))))
    ;; ---- softmax_f32 ------------------------------------------------------------
    ;; softmax_f32.ok: softmax of the rows of A as [2,2]
    (drop (call $check (i32.const 0x8b80) (i32.const 0)
      (call $softmax_f32 (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 3072))))
    ;; softmax_f32.rows_negative: rows = -2
    (drop (call $check (i32.const 0x8bc0) (i32.const -1)
      (call $softmax_f32 (i32.const -2) (i32.const 2) (i32.const 1024) (i32.const 3072))))
    ;; softmax_f32.cols_negative: cols = -2
    (drop (call $check (i32.const 0x8c00) (i32.const -1)
      (call $softmax_f32 (i32.const 2) (i32.const -2) (i32.const 1024) (i32.const 3072))))
    ;; softmax_f32.a_crosses_end: a (16 bytes) starts 12 bytes before the end
    (drop (call $check (i32.const 0x8c40) (i32.const -5)
      (call $softmax_f32 (i32.const 2) (i32.const 2) (i32.const 65524) (i32.const 3072))))
    ;; softmax_f32.out_misaligned: out not 4-byte aligned
    (drop (call $check (i32.const 0x8c80) (i32.const -5)
      (call $softmax_f32 (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 3074))))
    ;; softmax_f32.size_wraps_u32: rows = 2^16, cols = 2^14: 2^32 bytes, 0 mod 2^32
    (drop (call $check (i32.const 0x8cc0) (i32.const 1000)
      (call $softmax_f32 (i32.const 65536) (i32.const 16384) (i32.const 0) (i32.const 0))))
    ;; ---- reduce_f32 -------------------------------------------------------------
    ;; reduce_f32.ok: row sums of A as [2,2]
    (drop (call $check (i32.const 0x8d00) (i32.const 0)
      (call $reduce_f32 (i32.const 1) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 3072))))
    ;; reduce_f32.op_zero: op 0
    (drop (call $check (i32.const 0x8d40) (i32.const -1)
      (call $reduce_f32 (i32.const 0) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 3072))))
    ;; reduce_f32.op_unknown: op 4
    (drop (call $check (i32.const 0x8d80) (i32.const -1)
      (call $reduce_f32 (i32.const 4) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 3072))))
    ;; reduce_f32.rows_negative: rows = -1
    (drop (call $check (i32.const 0x8dc0) (i32.const -1)
      (call $reduce_f32 (i32.const 1) (i32.const -1) (i32.const 2) (i32.const 1024) (i32.const 3072))))
    ;; reduce_f32.out_at_end: out starts exactly at the end
    (drop (call $check (i32.const 0x8e00) (i32.const -5)
      (call $reduce_f32 (i32.const 1) (i32.const 2) (i32.const 2) (i32.const 1024) (i32.const 65536))))
    ;; reduce_f32.size_wraps_u32: rows = 2^14, cols = 2^16: a is 2^32 bytes (0 mod 2^32), out exactly 64 KiB at 0
    (drop (call $check (i32.const 0x8e40) (i32.const 1000)
      (call $reduce_f32 (i32.const 1) (i32.const 16384) (i32.const 65536) (i32.const 0) (i32.const 0))))
    ;; ---- tensor_new -------------------------------------------------------------
    ;; tensor_new.dtype_zero: dtype 0
    (drop (call $check (i32.const 0x8e80) (i32.const -1)
      (call $tensor_new (i32.const 0) (i32.const 2) (i32.const 256))))
    ;; tensor_new.dtype_unknown: dtype 99
    (drop (call $check (i32.const 0x8ec0) (i32.const -1)
      (call $tensor_new (i32.const 99) (i32.const 2) (i32.const 256))))
    ;; tensor_new.dtype_negative: dtype -1
    (drop (call $check (i32.const 0x8f00) (i32.const -1)
      (call $tensor_new (i32.const -1) (i32.const 2) (i32.const 256))))
    ;; tensor_new.ndim_zero: ndim 0
    (drop (call $check (i32.const 0x8f40) (i32.const -1)
      (call $tensor_new (i32.const 1) (i32.const 0) (i32.const 256))))
    ;; tensor_new.ndim_9: ndim 9 > MaxDims
    (drop (call $check (i32.const 0x8f80) (i32.const -1)
      (call $tensor_new (i32.const 1) (i32.const 9) (i32.const 356))))
    ;; tensor_new.ndim_negative: ndim -1
    (drop (call $check (i32.const 0x8fc0) (i32.const -1)
      (call $tensor_new (i32.const 1) (i32.const -1) (i32.const 256))))
    ;; tensor_new.ndim_huge: ndim 2^30 (4 GiB of dims)
    (drop (call $check (i32.const 0x9000) (i32.const -1)
      (call $tensor_new (i32.const 1) (i32.const 0x40000000) (i32.const 256))))
    ;; tensor_new.dims_past_end: dims start past the end
    (drop (call $check (i32.const 0x9040) (i32.const -5)
      (call $tensor_new (i32.const 1) (i32.const 2) (i32.const 0xFFFFFFF8))))
    ;; tensor_new.dims_cross_end: dims (8 bytes) start 4 bytes before the end
    (drop (call $check (i32.const 0x9080) (i32.const -5)
      (call $tensor_new (i32.const 1) (i32.const 2) (i32.const 65532))))
    ;; tensor_new.dim_negative: dims [2,-2]
    (drop (call $check (i32.const 0x90c0) (i32.const -1)
      (call $tensor_new (i32.const 1) (i32.const 2) (i32.const 280))))
    ;; tensor_new.dims_two_negative: dims [-1,-4], whose product is a plausible 4
    (drop (call $check (i32.const 0x9100) (i32.const -1)
      (call $tensor_new (i32.const 1) (i32.const 2) (i32.const 336))))
    ;; tensor_new.count_wraps_u32: dims [2^30+1,4]: 2^32+4 elements, 4 mod 2^32
    (call $free_if_pos (call $check (i32.const 0x9140) (i32.const 1000)
      (call $tensor_new (i32.const 1) (i32.const 2) (i32.const 288))))
    ;; tensor_new.bytes_wraps_u32: f32 [2^30+1]: 2^32+4 bytes, 4 mod 2^32
    (call $free_if_pos (call $check (i32.const 0x9180) (i32.const 1000)
      (call $tensor_new (i32.const 1) (i32.const 1) (i32.const 296))))
    ;; tensor_new.count_wraps_u64: dims [4,1923865,48448661,49477]: 2^64+4 elements, 4 mod 2^64
    (call $free_if_pos (call $check (i32.const 0x91c0) (i32.const 1000)
      (call $tensor_new (i32.const 1) (i32.const 4) (i32.const 300))))
    ;; tensor_new.bytes_wraps_u64: f32 [1923865,48448661,49477]: 2^62+1 elements, 2^64+4 bytes
    (call $free_if_pos (call $check (i32.const 0x9200) (i32.const 1000)
      (call $tensor_new (i32.const 1) (i32.const 3) (i32.const 316))))
    ;; tensor_new.too_large: f32 [2^31-1,2^31-1]: 16 EiB
    (call $free_if_pos (call $check (i32.const 0x9240) (i32.const 1000)
      (call $tensor_new (i32.const 1) (i32.const 2) (i32.const 328))))
    ;; ---- tensor_free ------------------------------------------------------------
    ;; tensor_free.zero: handle 0
    (drop (call $check (i32.const 0x9280) (i32.const -2)
      (call $tensor_free (i32.const 0))))
    ;; tensor_free.negative: handle -1
    (drop (call $check (i32.const 0x92c0) (i32.const -2)
      (call $tensor_free (i32.const -1))))
    ;; tensor_free.min_int: handle -2^31
    (drop (call $check (i32.const 0x9300) (i32.const -2)
      (call $tensor_free (i32.const 0x80000000))))
    ;; tensor_free.unknown: a handle never returned
    (drop (call $check (i32.const 0x9340) (i32.const -2)
      (call $tensor_free (i32.const 2147483632))))
    ;; tensor_free.twice: the freed $dead again
    (drop (call $check (i32.const 0x9380) (i32.const -2)
      (call $tensor_free (global.get $dead))))
    ;; ---- tensor_write and tensor_read ($f22 is 16 bytes) ------------------------
    ;; tensor_write.ok: A into $f22
    (drop (call $check (i32.const 0x93c0) (i32.const 0)
      (call $tensor_write (global.get $f22) (i32.const 1024) (i32.const 16))))
    ;; tensor_write.stale: into the freed $dead
    (drop (call $check (i32.const 0x9400) (i32.const -2)
      (call $tensor_write (global.get $dead) (i32.const 1024) (i32.const 16))))
    ;; tensor_write.ptr_past_end: from past the end
    (drop (call $check (i32.const 0x9440) (i32.const -5)
      (call $tensor_write (global.get $f22) (i32.const 0xFFFFFFF0) (i32.const 16))))
    ;; tensor_write.ptr_crosses_end: from 8 bytes before the end
    (drop (call $check (i32.const 0x9480) (i32.const -5)
      (call $tensor_write (global.get $f22) (i32.const 65528) (i32.const 16))))
    ;; tensor_write.len_short: 15 bytes for a 16-byte tensor
    (drop (call $check (i32.const 0x94c0) (i32.const 1000)
      (call $tensor_write (global.get $f22) (i32.const 1024) (i32.const 15))))
    ;; tensor_write.len_long: 17 bytes for a 16-byte tensor
    (drop (call $check (i32.const 0x9500) (i32.const 1000)
      (call $tensor_write (global.get $f22) (i32.const 1024) (i32.const 17))))
    ;; tensor_write.len_negative: -16 bytes
    (drop (call $check (i32.const 0x9540) (i32.const 1000)
      (call $tensor_write (global.get $f22) (i32.const 1024) (i32.const -16))))
    ;; tensor_read.ok: $f22 into C
    (drop (call $check (i32.const 0x9580) (i32.const 0)
      (call $tensor_read (global.get $f22) (i32.const 3072) (i32.const 16))))
    ;; tensor_read.stale: from the freed $dead
    (drop (call $check (i32.const 0x95c0) (i32.const -2)
      (call $tensor_read (global.get $dead) (i32.const 3072) (i32.const 16))))
    ;; tensor_read.ptr_past_end: into past the end
    (drop (call $check (i32.const 0x9600) (i32.const -5)
      (call $tensor_read (global.get $f22) (i32.const 0xFFFFFFF0) (i32.const 16))))
    ;; tensor_read.ptr_crosses_end: into 4 bytes before the end
    (drop (call $check (i32.const 0x9640) (i32.const -5)
      (call $tensor_read (global.get $f22) (i32.const 65532) (i32.const 16))))
    ;; tensor_read.ptr_negative: into -16
    (drop (call $check (i32.const 0x9680) (i32.const -5)
      (call $tensor_read (global.get $f22) (i32.const -16) (i32.const 16))))
    ;; tensor_read.len_short: 12 bytes of a 16-byte tensor
    (drop (call $check (i32.const 0x96c0) (i32.const 1000)
      (call $tensor_read (global.get $f22) (i32.const 3072) (i32.const 12))))
    ;; tensor_read.len_huge: 2^31-1 bytes
    (drop (call $check (i32.const 0x9700) (i32.const 1000)
      (call $tensor_read (global.get $f22) (i32.const 3072) (i32.const 0x7FFFFFFF))))
    ;; ---- tensor_dtype and tensor_shape -------------------------------------------
    ;; tensor_dtype.ok: $i8 is i8 (2)
    (drop (call $check (i32.const 0x9740) (i32.const 2)
      (call $tensor_dtype (global.get $i8))))
    ;; tensor_dtype.zero: handle 0
    (drop (call $check (i32.const 0x9780) (i32.const -2)
      (call $tensor_dtype (i32.const 0))))
    ;; tensor_dtype.stale: the freed $dead
    (drop (call $check (i32.const 0x97c0) (i32.const -2)
      (call $tensor_dtype (global.get $dead))))
    ;; tensor_shape.ok: $f23 has 2 dims
    (drop (call $check (i32.const 0x9800) (i32.const 2)
      (call $tensor_shape (global.get $f23) (i32.const 512) (i32.const 8))))
    ;; tensor_shape.stale: the freed $dead
    (drop (call $check (i32.const 0x9840) (i32.const -2)
      (call $tensor_shape (global.get $dead) (i32.const 512) (i32.const 8))))
    ;; tensor_shape.dims_past_end: dims out past the end
    (drop (call $check (i32.const 0x9880) (i32.const -5)
      (call $tensor_shape (global.get $f23) (i32.const 0xFFFFFFF0) (i32.const 8))))
    ;; tensor_shape.dims_cross_end: 2 dims (8 bytes) out at 4 bytes before the end
    (drop (call $check (i32.const 0x98c0) (i32.const -5)
      (call $tensor_shape (global.get $f23) (i32.const 65532) (i32.const 8))))
    ;; tensor_shape.max_ndim_negative: max_ndim -1
    (drop (call $check (i32.const 0x9900) (i32.const 1000)
      (call $tensor_shape (global.get $f23) (i32.const 512) (i32.const -1))))
    ;; ---- gemm on handles ----------------------------------------------------------
    ;; gemm.ok: $f22 . $f22 into a new tensor
    (call $free_if_pos (call $check (i32.const 0x9940) (i32.const 1001)
      (call $gemm (global.get $f22) (global.get $f22) (i32.const 0) (i32.const 0))))
    ;; gemm.into_ok: $f22 . $f22 written into an existing C (itself made by a gemm);
    ;; the answer is C's handle
    (call $free_if_pos (call $check (i32.const 0x9980) (i32.const 1001)
      (call $gemm (global.get $f22) (global.get $f22) (local.tee $h (call $gemm (global.get $f22) (global.get $f22) (i32.const 0) (i32.const 0))) (i32.const 0))))
    ;; gemm.stale_a: A is the freed $dead
    (drop (call $check (i32.const 0x99c0) (i32.const -2)
      (call $gemm (global.get $dead) (global.get $f22) (i32.const 0) (i32.const 0))))
    ;; gemm.unknown_b: B was never returned
    (drop (call $check (i32.const 0x9a00) (i32.const -2)
      (call $gemm (global.get $f22) (i32.const 2147483632) (i32.const 0) (i32.const 0))))
    ;; gemm.negative_c: C = -1
    (drop (call $check (i32.const 0x9a40) (i32.const -2)
      (call $gemm (global.get $f22) (global.get $f22) (i32.const -1) (i32.const 0))))
    ;; gemm.mixed_dtypes: i8 . f32
    (drop (call $check (i32.const 0x9a80) (i32.const -4)
      (call $gemm (global.get $i8) (global.get $f22) (i32.const 0) (i32.const 0))))
    ;; gemm.i32_inputs: i32 . i32
    (drop (call $check (i32.const 0x9ac0) (i32.const -4)
      (call $gemm (global.get $i32) (global.get $i32) (i32.const 0) (i32.const 0))))
    ;; gemm.k_mismatch: [2,3] . [2,3]
    (drop (call $check (i32.const 0x9b00) (i32.const -3)
      (call $gemm (global.get $f23) (global.get $f23) (i32.const 0) (i32.const 0))))
    ;; gemm.c_wrong_shape: [2,2] . [2,2] into a [2,3] C
    (drop (call $check (i32.const 0x9b40) (i32.const -3)
      (call $gemm (global.get $f22) (global.get $f22) (global.get $f23) (i32.const 0))))
    ;; gemm.c_wrong_dtype: f32 [2,2] . [2,2] into the i32 [2,2] C
    (drop (call $check (i32.const 0x9b80) (i32.const 1000)
      (call $gemm (global.get $f22) (global.get $f22) (global.get $i32) (i32.const 0))))
    ;; gemm.flags_unknown: flag bit 3
    (call $free_if_pos (call $check (i32.const 0x9bc0) (i32.const -1)
      (call $gemm (global.get $f22) (global.get $f22) (i32.const 0) (i32.const 8))))
    ;; gemm.one_dim: [3] . [3]: GEMM needs matrices
    (call $free_if_pos (call $check (i32.const 0x9c00) (i32.const 1000)
      (call $gemm (global.get $f3) (global.get $f3) (i32.const 0) (i32.const 0))))
    ;; gemm.accumulate_without_c: ACCUMULATE with no C to add to
    (call $free_if_pos (call $check (i32.const 0x9c40) (i32.const -1)
      (call $gemm (global.get $f22) (global.get $f22) (i32.const 0) (i32.const 4))))
    ;; gemm.c_is_input: C is also A and B: the output may not alias an input
    (drop (call $check (i32.const 0x9c80) (i32.const -1)
      (call $gemm (global.get $f22) (global.get $f22) (global.get $f22) (i32.const 0))))
    ;; ---- binary, unary, softmax, reduce on handles -------------------------------
    ;; binary.ok: [2,3] + [3] (broadcast)
    (call $free_if_pos (call $check (i32.const 0x9cc0) (i32.const 1001)
      (call $binary (i32.const 1) (global.get $f23) (global.get $f3))))
    ;; binary.op_zero: op 0
    (drop (call $check (i32.const 0x9d00) (i32.const -1)
      (call $binary (i32.const 0) (global.get $f23) (global.get $f3))))
    ;; binary.op_unknown: op 5
    (drop (call $check (i32.const 0x9d40) (i32.const -1)
      (call $binary (i32.const 5) (global.get $f23) (global.get $f3))))
    ;; binary.stale: $dead + $f22
    (drop (call $check (i32.const 0x9d80) (i32.const -2)
      (call $binary (i32.const 1) (global.get $dead) (global.get $f22))))
    ;; binary.not_suffix: [2,2] + [3]
    (drop (call $check (i32.const 0x9dc0) (i32.const -3)
      (call $binary (i32.const 1) (global.get $f22) (global.get $f3))))
    ;; binary.b_larger: [3] + [2,3]
    (drop (call $check (i32.const 0x9e00) (i32.const -3)
      (call $binary (i32.const 1) (global.get $f3) (global.get $f23))))
    ;; binary.i8: i8 + i8
    (drop (call $check (i32.const 0x9e40) (i32.const -4)
      (call $binary (i32.const 1) (global.get $i8) (global.get $i8))))
    ;; binary.mixed: f32 + i32
    (drop (call $check (i32.const 0x9e80) (i32.const -4)
      (call $binary (i32.const 1) (global.get $f22) (global.get $i32))))
    ;; binary.i32_mul: i32 * i32 (only add takes i32)
    (drop (call $check (i32.const 0x9ec0) (i32.const -4)
      (call $binary (i32.const 3) (global.get $i32) (global.get $i32))))
    ;; unary.ok: ReLU of [2,3]
    (call $free_if_pos (call $check (i32.const 0x9f00) (i32.const 1001)
      (call $unary (i32.const 1) (global.get $f23))))
    ;; unary.op_zero: op 0
    (drop (call $check (i32.const 0x9f40) (i32.const -1)
      (call $unary (i32.const 0) (global.get $f23))))
    ;; unary.op_unknown: op 7 (ABI v2 ends at 6, sqrt)
    (drop (call $check (i32.const 0x9f80) (i32.const -1)
      (call $unary (i32.const 7) (global.get $f23))))
    ;; unary.stale: the freed $dead
    (drop (call $check (i32.const 0x9fc0) (i32.const -2)
      (call $unary (i32.const 1) (global.get $dead))))
    ;; unary.i32: ReLU of i32
    (drop (call $check (i32.const 0xa000) (i32.const -4)
      (call $unary (i32.const 1) (global.get $i32))))
    ;; softmax.ok: softmax of [2,3]
    (call $free_if_pos (call $check (i32.const 0xa040) (i32.const 1001)
      (call $softmax (global.get $f23))))
    ;; softmax.stale: the freed $dead
    (drop (call $check (i32.const 0xa080) (i32.const -2)
      (call $softmax (global.get $dead))))
    ;; softmax.i8: softmax of i8
    (drop (call $check (i32.const 0xa0c0) (i32.const -4)
      (call $softmax (global.get $i8))))
    ;; reduce.ok: row sums of [2,3]
    (call $free_if_pos (call $check (i32.const 0xa100) (i32.const 1001)
      (call $reduce (i32.const 1) (global.get $f23))))
    ;; reduce.op_zero: op 0
    (drop (call $check (i32.const 0xa140) (i32.const -1)
      (call $reduce (i32.const 0) (global.get $f23))))
    ;; reduce.op_unknown: op 4
    (drop (call $check (i32.const 0xa180) (i32.const -1)
      (call $reduce (i32.const 4) (global.get $f23))))
    ;; reduce.stale: the freed $dead
    (drop (call $check (i32.const 0xa1c0) (i32.const -2)
      (call $reduce (i32.const 1) (global.get $dead))))
    ;; reduce.i32: sum of i32
    (drop (call $check (i32.const 0xa200) (i32.const -4)
      (call $reduce (i32.const 1) (global.get $i32))))
    ;; ---- tensor_reshape ($f22 has 4 elements) ------------------------------------
    ;; tensor_reshape.ok: [2,2] -> [4]
    (drop (call $check (i32.const 0xa240) (i32.const 0)
      (call $tensor_reshape (global.get $f22) (i32.const 1) (i32.const 272))))
    ;; tensor_reshape.ok_back: [4] -> [2,2]
    (drop (call $check (i32.const 0xa280) (i32.const 0)
      (call $tensor_reshape (global.get $f22) (i32.const 2) (i32.const 256))))
    ;; tensor_reshape.stale: the freed $dead
    (drop (call $check (i32.const 0xa2c0) (i32.const -2)
      (call $tensor_reshape (global.get $dead) (i32.const 2) (i32.const 256))))
    ;; tensor_reshape.ndim_zero: ndim 0
    (drop (call $check (i32.const 0xa300) (i32.const -1)
      (call $tensor_reshape (global.get $f22) (i32.const 0) (i32.const 256))))
    ;; tensor_reshape.ndim_9: ndim 9
    (drop (call $check (i32.const 0xa340) (i32.const -1)
      (call $tensor_reshape (global.get $f22) (i32.const 9) (i32.const 356))))
    ;; tensor_reshape.dims_past_end: dims past the end
    (drop (call $check (i32.const 0xa380) (i32.const -5)
      (call $tensor_reshape (global.get $f22) (i32.const 2) (i32.const 0xFFFFFFF8))))
    ;; tensor_reshape.count_differs: [2,2] -> [2,3]
    (drop (call $check (i32.const 0xa3c0) (i32.const -3)
      (call $tensor_reshape (global.get $f22) (i32.const 2) (i32.const 264))))
    ;; tensor_reshape.two_negative: [2,2] -> [-1,-4], whose product is 4
    (drop (call $check (i32.const 0xa400) (i32.const -1)
      (call $tensor_reshape (global.get $f22) (i32.const 2) (i32.const 336))))
    ;; tensor_reshape.count_wraps_u32: [2,2] -> [2^30+1,4], 4 mod 2^32
    (drop (call $check (i32.const 0xa440) (i32.const 1000)
      (call $tensor_reshape (global.get $f22) (i32.const 2) (i32.const 288))))
    ;; tensor_reshape.count_wraps_u64: [2,2] -> [4,1923865,48448661,49477], 4 mod 2^64
    (drop (call $check (i32.const 0xa480) (i32.const 1000)
      (call $tensor_reshape (global.get $f22) (i32.const 4) (i32.const 300))))
    ;; tensor_reshape.still_2x2: after all that, $f22 still has 2 dims
    (drop (call $check (i32.const 0xa4c0) (i32.const 2)
      (call $tensor_shape (global.get $f22) (i32.const 512) (i32.const 8))))
    ;; ---- Exhaustion ---------------------------------------------------------------
    ;; Host tensor memory: make f32 [8192,8192] tensors (256 MiB each) until the
    ;; host refuses, at most 256 of them (64 GiB), keeping the handles at 0x4000;
    ;; the last answer must be an error (ENOMEM). Then free them all.
    (local.set $i (i32.const 0))
    (block $full
      (loop $more
        (local.set $h (call $tensor_new (i32.const 1) (i32.const 2) (i32.const 344)))
        (br_if $full (i32.lt_s (local.get $h) (i32.const 0)))
        (i32.store (i32.add (i32.const 0x4000) (i32.shl (local.get $i) (i32.const 2))) (local.get $h))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $more (i32.lt_u (local.get $i) (i32.const 256)))))
    ;; exhaust.tensor_memory: the answer that ended the loop
    (drop (call $check (i32.const 0xa500) (i32.const 1000)
      (local.get $h)))
    (block $freed
      (loop $next
        (br_if $freed (i32.eqz (local.get $i)))
        (local.set $i (i32.sub (local.get $i) (i32.const 1)))
        (drop (call $tensor_free
          (i32.load (i32.add (i32.const 0x4000) (i32.shl (local.get $i) (i32.const 2))))))
        (br $next)))
    ;; The handle table: make f32 [1] tensors until the host refuses, at most 2^20
    ;; of them; the last answer must be an error (ETOOMANY). They are not freed:
    ;; the host must reclaim them when the job ends.
    (local.set $i (i32.const 0))
    (block $full
      (loop $more
        (local.set $h (call $tensor_new (i32.const 1) (i32.const 1) (i32.const 352)))
        (br_if $full (i32.lt_s (local.get $h) (i32.const 0)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $more (i32.lt_u (local.get $i) (i32.const 0x100000)))))
    ;; exhaust.handles: the answer that ended the loop
    (drop (call $check (i32.const 0xa540) (i32.const 1000)
      (local.get $h)))
    (call $summary))
)
