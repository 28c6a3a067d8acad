;; proc_exit3.wat - prints a line, then calls proc_exit(3).
;;
;; The sandbox should answer: a completed job with exit code 3 (a job failure,
;; not a sandbox error) whose stdout is "exiting with 3\n".
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "exiting with 3\n")
  (func (export "_start")
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 15))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    (call $proc_exit (i32.const 3))
    unreachable))
