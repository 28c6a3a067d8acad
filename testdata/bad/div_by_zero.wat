;; div_by_zero.wat - divides an integer by zero.
;;
;; The divisor is read from memory so that no tool can fold it away.
;;
;; The sandbox should answer: the job fails with a trap ("integer divide by
;; zero"); the provider is fine (no SIGFPE escapes the runtime).
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (drop (i32.div_s (i32.const 1) (i32.load (i32.const 0))))))
