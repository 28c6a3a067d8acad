;; int_overflow.wat - divides INT_MIN by -1, the one overflowing integer
;; division (on x86 it raises the same CPU exception as a division by zero).
;;
;; The sandbox should answer: the job fails with a trap ("integer overflow");
;; the provider is fine.
(module
  (memory (export "memory") 1)
  (data (i32.const 0) "\ff\ff\ff\ff")  ;; -1
  (func (export "_start")
    (drop (i32.div_s (i32.const 0x80000000) (i32.load (i32.const 0))))))
