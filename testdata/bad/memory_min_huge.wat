;; memory_min_huge.wat - declares a minimum memory of 65536 pages (4 GiB),
;; the most a 32-bit module can have, so that merely instantiating it would
;; allocate 4 GiB.
;;
;; The sandbox should answer: refuse the module (its minimum exceeds the job's
;; memory limit) without allocating the memory.
(module
  (memory (export "memory") 65536)
  (func (export "_start")))
