;; exp_recursion.wat - exponential work without any loop.
;;
;; f(n) = f(n-1) + f(n-1) + 1, f(0) = 1, called with n = 64: 2^64 calls,
;; but never more than 65 frames deep, so it neither overflows the stack nor
;; contains a backward branch. A sandbox that only checks for interruption at
;; loop back-edges never stops it.
;;
;; The sandbox should answer: stop it at the job's time (or fuel) limit and
;; report a timeout.
(module
  (memory (export "memory") 1)
  (func $f (param $n i32) (result i64)
    (if (result i64) (i32.eqz (local.get $n))
      (then (i64.const 1))
      (else
        (i64.add
          (i64.add
            (call $f (i32.sub (local.get $n) (i32.const 1)))
            (call $f (i32.sub (local.get $n) (i32.const 1))))
          (i64.const 1)))))
  (func (export "_start")
    (drop (call $f (i32.const 64)))))
