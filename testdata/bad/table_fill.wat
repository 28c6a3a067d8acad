;; table_fill.wat - a function table of 2^27 entries, filled.
;;
;; Like table_huge.wat, but _start then fills every entry with a function
;; reference (table.fill), so the 1 GiB of host memory behind the table
;; (8 bytes per entry) is really written, not only reserved. Linear-memory
;; limits do not see it.
;;
;; The sandbox should answer: refuse the module (table too large) or keep the
;; provider's memory bounded; it must not let a job commit 1 GiB this way.
(module
  (table $t 134217728 funcref)
  (memory (export "memory") 1)
  (func $f)
  (elem declare func $f)
  (func (export "_start")
    (table.fill $t (i32.const 0) (ref.func $f) (i32.const 134217728))))
