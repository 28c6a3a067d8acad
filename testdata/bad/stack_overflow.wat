;; stack_overflow.wat - recurses without end.
;;
;; Each call also keeps a few locals live so that frames are not trivially
;; small.
;;
;; The sandbox should answer: the job fails with a trap (call stack exhausted /
;; stack overflow) quickly; the provider's own stack is not overrun.
(module
  (memory (export "memory") 1)
  (func $down (param $n i64) (result i64)
    (local $a i64) (local $b i64)
    (local.set $a (i64.mul (local.get $n) (i64.const 3)))
    (local.set $b (call $down (i64.add (local.get $n) (i64.const 1))))
    (i64.add (local.get $a) (local.get $b)))
  (func (export "_start")
    (drop (call $down (i64.const 0)))))
