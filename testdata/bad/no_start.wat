;; no_start.wat - a valid module that is not a WASI command: it exports a
;; function "main" and a memory, but no _start.
;;
;; The sandbox should answer: refuse the job ("no _start export"), without
;; calling anything.
(module
  (memory (export "memory") 1)
  (func (export "main") (result i32)
    (i32.const 0)))
