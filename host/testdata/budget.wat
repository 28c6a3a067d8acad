;; budget: memory.grow and host tensors drawing on one memory budget.
;;
;; stdin: three little-endian i32 values: order, pages, bytes. With order 0
;; the guest first grows its memory by pages, then asks for an i8 tensor of
;; bytes elements; with order 1 it asks for the tensor first. Then it frees
;; the tensor (if it got one) and grows by pages again. Order 2 is order 1,
;; then a trap (unreachable) if the grow failed: a guest out of memory; order
;; 3 exits with status 2 there instead, as a Go guest does. stdout: four
;; little-endian i32 values: the first grow's result, tensor_new's result,
;; tensor_free's result (0 when there was no tensor), the second grow's
;; result. memory.grow answers -1 and tensor_new ENOMEM (-6) when the job's
;; memory limit would be passed.
(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (import "infernet" "tensor_new" (func $tensor_new (param i32 i32 i32) (result i32)))
  (import "infernet" "tensor_free" (func $tensor_free (param i32) (result i32)))
  (memory (export "memory") 1)
  ;; 0: iovec, 16: nread, 32: input (order, pages, bytes), 64: output, 96: dims
  (func $tensor (result i32)
    (i32.store (i32.const 96) (i32.load (i32.const 40)))
    (call $tensor_new (i32.const 2) (i32.const 1) (i32.const 96)))
  (func (export "_start")
    (local $h i32)
    (i32.store (i32.const 0) (i32.const 32))
    (i32.store (i32.const 4) (i32.const 12))
    (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 16)))
    (if (i32.eqz (i32.load (i32.const 32)))
      (then
        (i32.store (i32.const 64) (memory.grow (i32.load (i32.const 36))))
        (local.set $h (call $tensor)))
      (else
        (local.set $h (call $tensor))
        (i32.store (i32.const 64) (memory.grow (i32.load (i32.const 36))))))
    ;; Order 2: as 1, then trap if the grow failed, as a Go guest does.
    (if (i32.and (i32.eq (i32.load (i32.const 32)) (i32.const 2))
                 (i32.eq (i32.load (i32.const 64)) (i32.const -1)))
      (then unreachable))
    ;; Order 3: as 1, then exit 2 if the grow failed.
    (if (i32.and (i32.eq (i32.load (i32.const 32)) (i32.const 3))
                 (i32.eq (i32.load (i32.const 64)) (i32.const -1)))
      (then (call $proc_exit (i32.const 2))))
    (i32.store (i32.const 68) (local.get $h))
    (if (i32.gt_s (local.get $h) (i32.const 0))
      (then (i32.store (i32.const 72) (call $tensor_free (local.get $h)))))
    (i32.store (i32.const 76) (memory.grow (i32.load (i32.const 36))))
    (i32.store (i32.const 0) (i32.const 64))
    (i32.store (i32.const 4) (i32.const 16))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 16)))))
