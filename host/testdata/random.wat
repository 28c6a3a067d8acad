;; random: writes 16 bytes of WASI random_get to stdout. Used to check that
;; the sandbox's random source is deterministic per job seed.
(module
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (drop (call $random_get (i32.const 64) (i32.const 16)))
    (i32.store (i32.const 0) (i32.const 64))  ;; iovec.buf
    (i32.store (i32.const 4) (i32.const 16))  ;; iovec.len
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))
