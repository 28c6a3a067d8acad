;; memory_grow_loop.wat - grows linear memory one page at a time up to the
;; largest size the module allows (no maximum is declared, so 65536 pages,
;; 4 GiB), writing one byte into every 4 KiB of each new page so that the
;; memory is really committed, not only reserved.
;;
;; When memory.grow fails (returns -1) it prints "grown to <pages> pages" and
;; exits 0.
;;
;; The sandbox should answer: memory.grow fails at the job's memory limit (or
;; the job is stopped when it reaches it); the provider's memory use stays
;; bounded by that limit.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "grown to ")
  (data (i32.const 80) " pages\n")

  ;; write writes memory[ptr, ptr+len) to stdout.
  (func $write (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0) (local.get $ptr))
    (i32.store (i32.const 4) (local.get $len))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))

  ;; print_u32 writes v in decimal.
  (func $print_u32 (param $v i32)
    (local $p i32)
    (local.set $p (i32.const 48))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.rem_u (local.get $v) (i32.const 10))))
      (local.set $v (i32.div_u (local.get $v) (i32.const 10)))
      (br_if $digit (local.get $v)))
    (call $write (local.get $p) (i32.sub (i32.const 48) (local.get $p))))

  (func (export "_start")
    (local $old i32) (local $addr i32) (local $end i32)
    (block $full
      (loop $grow
        (local.set $old (memory.grow (i32.const 1)))
        (br_if $full (i32.eq (local.get $old) (i32.const -1)))
        ;; Touch every 4 KiB of the new page [old*64Ki, (old+1)*64Ki).
        (local.set $addr (i32.shl (local.get $old) (i32.const 16)))
        (local.set $end (i32.add (local.get $addr) (i32.const 65536)))
        (loop $touch
          (i32.store8 (local.get $addr) (i32.const 1))
          (local.set $addr (i32.add (local.get $addr) (i32.const 4096)))
          ;; At the last page end wraps to 0; compare as "addr != end".
          (br_if $touch (i32.ne (local.get $addr) (local.get $end))))
        (br $grow)))
    (call $write (i32.const 64) (i32.const 9))
    (call $print_u32 (memory.size))
    (call $write (i32.const 80) (i32.const 7))))
