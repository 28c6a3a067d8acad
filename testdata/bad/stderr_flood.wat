;; stderr_flood.wat - writes to stderr forever.
;;
;; A 64 KiB buffer of 'e' is written with fd_write in an endless loop, and
;; every error is ignored, so the module keeps calling even once the sandbox
;; refuses its output.
;;
;; The sandbox should answer: keep at most the job's output limit of stderr (stderr is usually kept for diagnostics only)
;; and stop the job (output limit exceeded, or at the latest its time limit);
;; the provider's memory and disk stay bounded.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "_start")
    ;; buffer = 'e' * 65536 at [65536, 131072); iovec {65536, 65536} at 0.
    (memory.fill (i32.const 65536) (i32.const 101) (i32.const 65536))
    (i32.store (i32.const 0) (i32.const 65536))
    (i32.store (i32.const 4) (i32.const 65536))
    (loop $forever
      (drop (call $fd_write (i32.const 2) (i32.const 0) (i32.const 1) (i32.const 8)))
      (br $forever))))
