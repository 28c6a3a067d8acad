;; bad_start_type.wat - exports _start with the wrong type: it takes an i32
;; and returns one, where WASI requires () -> ().
;;
;; The sandbox should answer: refuse the job (bad _start signature) rather
;; than call it with made-up arguments.
(module
  (memory (export "memory") 1)
  (func (export "_start") (param i32) (result i32)
    (local.get 0)))
