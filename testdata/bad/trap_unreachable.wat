;; trap_unreachable.wat - executes the unreachable instruction.
;;
;; What a Rust panic or a C abort() compiles to.
;;
;; The sandbox should answer: the job fails with a trap ("unreachable"); no
;; output, the provider is fine.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    unreachable))
