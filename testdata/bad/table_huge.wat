;; table_huge.wat - declares a function table of 2^27 entries, the largest
;; wazero accepts. At 8 bytes per entry, instantiation allocates 1 GiB of
;; host memory that no memory limit on linear memory accounts for.
;;
;; The sandbox should answer: refuse the module (table too large), or at least
;; keep the provider's memory bounded.
(module
  (table 134217728 funcref)
  (memory (export "memory") 1)
  (func (export "_start")))
