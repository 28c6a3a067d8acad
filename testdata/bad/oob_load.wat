;; oob_load.wat - loads from an address past the end of linear memory.
;;
;; The sandbox should answer: the job fails with a trap ("out of bounds memory
;; access"); nothing outside the guest's memory is read.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (drop (i64.load (i32.const 0xFFFFFFF8)))))
