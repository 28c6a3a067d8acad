;; data_oob.wat - an active data segment that does not fit in memory.
;;
;; The segment is 8 bytes at offset 65532 of a 65536-byte memory, so
;; initialising memory traps during instantiation, before _start.
;;
;; The sandbox should answer: the job fails at instantiation (out of bounds
;; memory access); nothing is written outside the guest's memory.
(module
  (memory (export "memory") 1)
  (data (i32.const 65532) "12345678")
  (func (export "_start")))
