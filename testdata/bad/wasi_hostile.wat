;; wasi_hostile.wat - hostile pointers in WASI calls.
;;
;; Calls WASI functions with pointers and lengths that lie (partly) outside the
;; module's one page (64 KiB) of linear memory, or whose size arithmetic wraps
;; around 2^32, and prints one line per call to stdout:
;;
;;     <label> want <errno> got <errno>
;;
;; then "mismatches <n>" and exits 0. WASI errno 21 is EFAULT and 8 is EBADF;
;; "want err" accepts any non-zero errno and "want any" any answer.
;;
;; The sandbox should answer: no trap, no host crash, exit code 0, every call
;; answered as wanted (the output ends in "mismatches 0"), and nothing
;; written to stdout by the bad fd_write calls themselves. Run it with any
;; stdin (including none).
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get"
    (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get"
    (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get"
    (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get"
    (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_fdstat_get"
    (func $fd_fdstat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff"
    (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)

  ;; ---- Output helpers -------------------------------------------------------
  ;; Memory layout: [0,8) iovec, [8,12) nwritten, [16,48) number buffer,
  ;; [64,128) fixed strings, [0x8000, 0x10000) one 64-byte slot per label.
  (data (i32.const 64) " want ")
  (data (i32.const 72) " got ")
  (data (i32.const 80) "err")
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
  ;; "any error (non-zero)", or 1001 for "a positive value" (a handle, printed as
  ;; "pos" so that the output does not depend on how the host numbers them),
  ;; or 1002 for "any answer" (the call only has to return).
  (func $check (param $label i32) (param $want i32) (param $got i32) (result i32)
    (local $ok i32)
    (local.set $ok
      (if (result i32) (i32.eq (local.get $want) (i32.const 1000))
        (then (i32.ne (local.get $got) (i32.const 0)))
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


  ;; ---- Test iovecs ({buf, len} pairs of i32) -----------------------------------
  (data (i32.const 1024) "data\n")
  (data (i32.const 2048) "\f0\ff\ff\ff\10\00\00\00")  ;; {0xFFFFFFF0, 16}: buf past the end
  (data (i32.const 2056) "\fa\ff\00\00\64\00\00\00")  ;; {65530, 100}: buf crosses the end
  (data (i32.const 2064) "\00\04\00\00\00\00\00\00")  ;; {1024, 0}: valid and empty
  (data (i32.const 2072) "\00\04\00\00\ff\ff\ff\ff")  ;; {1024, 0xFFFFFFFF}: huge len
  (data (i32.const 2080) "\10\00\00\00\f0\ff\ff\ff")  ;; {16, 0xFFFFFFF0}: buf+len wraps to 0

  ;; ---- Labels, one 64-byte slot each ----------------------------------------
  (data (i32.const 0x8000) "fd_write.iovs_past_end\00")
  (data (i32.const 0x8040) "fd_write.iovs_crosses_end\00")
  (data (i32.const 0x8080) "fd_write.buf_past_end\00")
  (data (i32.const 0x80c0) "fd_write.buf_crosses_end\00")
  (data (i32.const 0x8100) "fd_write.buf_len_huge\00")
  (data (i32.const 0x8140) "fd_write.buf_wraps\00")
  (data (i32.const 0x8180) "fd_write.iovs_len_huge\00")
  (data (i32.const 0x81c0) "fd_write.iovs_len_wraps\00")
  (data (i32.const 0x8200) "fd_write.iovs_len_max\00")
  (data (i32.const 0x8240) "fd_write.nwritten_past_end\00")
  (data (i32.const 0x8280) "fd_write.bad_fd\00")
  (data (i32.const 0x82c0) "fd_read.iovs_past_end\00")
  (data (i32.const 0x8300) "fd_read.buf_past_end\00")
  (data (i32.const 0x8340) "fd_read.buf_crosses_end\00")
  (data (i32.const 0x8380) "fd_read.buf_wraps\00")
  (data (i32.const 0x83c0) "fd_read.iovs_len_wraps\00")
  (data (i32.const 0x8400) "fd_read.nread_past_end\00")
  (data (i32.const 0x8440) "random_get.past_end\00")
  (data (i32.const 0x8480) "random_get.crosses_end\00")
  (data (i32.const 0x84c0) "random_get.len_huge\00")
  (data (i32.const 0x8500) "random_get.wraps\00")
  (data (i32.const 0x8540) "clock_time_get.past_end\00")
  (data (i32.const 0x8580) "args_sizes_get.past_end\00")
  (data (i32.const 0x85c0) "environ_sizes_get.past_end\00")
  (data (i32.const 0x8600) "fd_fdstat_get.past_end\00")
  (data (i32.const 0x8640) "poll_oneoff.in_past_end\00")
  (data (i32.const 0x8680) "poll_oneoff.nsubscriptions_huge\00")

  (func (export "_start")
    ;; fd_write.iovs_past_end: the iovec array starts past the end of memory
    (drop (call $check (i32.const 0x8000) (i32.const 21)
      (call $fd_write (i32.const 1) (i32.const 0xFFFFFFF8) (i32.const 1) (i32.const 8))))
    ;; fd_write.iovs_crosses_end: the 8-byte iovec starts 4 bytes before the end
    (drop (call $check (i32.const 0x8040) (i32.const 21)
      (call $fd_write (i32.const 1) (i32.const 65532) (i32.const 1) (i32.const 8))))
    ;; fd_write.buf_past_end: an iovec whose buffer starts past the end
    (drop (call $check (i32.const 0x8080) (i32.const 21)
      (call $fd_write (i32.const 1) (i32.const 2048) (i32.const 1) (i32.const 8))))
    ;; fd_write.buf_crosses_end: an iovec whose buffer runs 94 bytes past the end
    (drop (call $check (i32.const 0x80c0) (i32.const 21)
      (call $fd_write (i32.const 1) (i32.const 2056) (i32.const 1) (i32.const 8))))
    ;; fd_write.buf_len_huge: an iovec of 4 GiB - 1 bytes
    (drop (call $check (i32.const 0x8100) (i32.const 21)
      (call $fd_write (i32.const 1) (i32.const 2072) (i32.const 1) (i32.const 8))))
    ;; fd_write.buf_wraps: an iovec whose buf+len wraps around 2^32 to 0
    (drop (call $check (i32.const 0x8140) (i32.const 21)
      (call $fd_write (i32.const 1) (i32.const 2080) (i32.const 1) (i32.const 8))))
    ;; fd_write.iovs_len_huge: iovs_len 2^31-1: the iovec array runs far past the end
    (drop (call $check (i32.const 0x8180) (i32.const 21)
      (call $fd_write (i32.const 1) (i32.const 2064) (i32.const 0x7FFFFFFF) (i32.const 8))))
    ;; fd_write.iovs_len_wraps: iovs_len 2^29: 8*iovs_len wraps to 0 in 32 bits. The right answer
    ;; is 21, but wazero v1.11.0 computes the size in uint32, reads no iovec at
    ;; all and answers 0 (harmless: nothing outside memory is touched)
    (drop (call $check (i32.const 0x81c0) (i32.const 1002)
      (call $fd_write (i32.const 1) (i32.const 2064) (i32.const 0x20000000) (i32.const 8))))
    ;; fd_write.iovs_len_max: iovs_len 0xFFFFFFFF
    (drop (call $check (i32.const 0x8200) (i32.const 21)
      (call $fd_write (i32.const 1) (i32.const 2064) (i32.const -1) (i32.const 8))))
    ;; fd_write.nwritten_past_end: the result pointer is past the end (the iovec is empty)
    (drop (call $check (i32.const 0x8240) (i32.const 21)
      (call $fd_write (i32.const 1) (i32.const 2064) (i32.const 1) (i32.const 0xFFFFFFFC))))
    ;; fd_write.bad_fd: a file descriptor that is not open
    (drop (call $check (i32.const 0x8280) (i32.const 8)
      (call $fd_write (i32.const 99) (i32.const 2064) (i32.const 1) (i32.const 8))))
    ;; fd_read.iovs_past_end: fd_read: the iovec array starts past the end
    (drop (call $check (i32.const 0x82c0) (i32.const 21)
      (call $fd_read (i32.const 0) (i32.const 0xFFFFFFF8) (i32.const 1) (i32.const 8))))
    ;; fd_read.buf_past_end: fd_read into a buffer past the end
    (drop (call $check (i32.const 0x8300) (i32.const 21)
      (call $fd_read (i32.const 0) (i32.const 2048) (i32.const 1) (i32.const 8))))
    ;; fd_read.buf_crosses_end: fd_read into a buffer that runs past the end
    (drop (call $check (i32.const 0x8340) (i32.const 21)
      (call $fd_read (i32.const 0) (i32.const 2056) (i32.const 1) (i32.const 8))))
    ;; fd_read.buf_wraps: fd_read into a buffer whose buf+len wraps to 0
    (drop (call $check (i32.const 0x8380) (i32.const 21)
      (call $fd_read (i32.const 0) (i32.const 2080) (i32.const 1) (i32.const 8))))
    ;; fd_read.iovs_len_wraps: fd_read with iovs_len 2^29 (8*len wraps to 0): wazero v1.11.0
    ;; answers 0, as for fd_write.iovs_len_wraps
    (drop (call $check (i32.const 0x83c0) (i32.const 1002)
      (call $fd_read (i32.const 0) (i32.const 2064) (i32.const 0x20000000) (i32.const 8))))
    ;; fd_read.nread_past_end: fd_read with the result pointer past the end
    (drop (call $check (i32.const 0x8400) (i32.const 21)
      (call $fd_read (i32.const 0) (i32.const 2064) (i32.const 1) (i32.const 0xFFFFFFFC))))
    ;; random_get.past_end: random_get into a buffer past the end
    (drop (call $check (i32.const 0x8440) (i32.const 21)
      (call $random_get (i32.const 0xFFFFFFF0) (i32.const 16))))
    ;; random_get.crosses_end: random_get into 16 bytes that start 8 before the end
    (drop (call $check (i32.const 0x8480) (i32.const 21)
      (call $random_get (i32.const 65528) (i32.const 16))))
    ;; random_get.len_huge: random_get of 4 GiB - 1 bytes
    (drop (call $check (i32.const 0x84c0) (i32.const 21)
      (call $random_get (i32.const 0) (i32.const -1))))
    ;; random_get.wraps: random_get where ptr+len wraps around 2^32 to 0
    (drop (call $check (i32.const 0x8500) (i32.const 21)
      (call $random_get (i32.const 16) (i32.const 0xFFFFFFF0))))
    ;; clock_time_get.past_end: clock_time_get with the result pointer past the end
    (drop (call $check (i32.const 0x8540) (i32.const 21)
      (call $clock_time_get (i32.const 0) (i64.const 1) (i32.const 0xFFFFFFF8))))
    ;; args_sizes_get.past_end: args_sizes_get with the argc pointer past the end
    (drop (call $check (i32.const 0x8580) (i32.const 21)
      (call $args_sizes_get (i32.const 0xFFFFFFFC) (i32.const 8))))
    ;; environ_sizes_get.past_end: environ_sizes_get with a result pointer past the end
    (drop (call $check (i32.const 0x85c0) (i32.const 21)
      (call $environ_sizes_get (i32.const 8) (i32.const 0xFFFFFFFC))))
    ;; fd_fdstat_get.past_end: fd_fdstat_get with the 24-byte result crossing the end
    (drop (call $check (i32.const 0x8600) (i32.const 21)
      (call $fd_fdstat_get (i32.const 1) (i32.const 65528))))
    ;; poll_oneoff.in_past_end: poll_oneoff with the subscriptions past the end
    (drop (call $check (i32.const 0x8640) (i32.const 21)
      (call $poll_oneoff (i32.const 0xFFFFFFF0) (i32.const 4096) (i32.const 1) (i32.const 8))))
    ;; poll_oneoff.nsubscriptions_huge: poll_oneoff with 2^31-1 subscriptions (48 bytes each)
    (drop (call $check (i32.const 0x8680) (i32.const 1000)
      (call $poll_oneoff (i32.const 4096) (i32.const 8192) (i32.const 0x7FFFFFFF) (i32.const 8))))
    (call $summary))
)
