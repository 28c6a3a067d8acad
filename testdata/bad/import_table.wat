;; import_table.wat - imports a table instead of defining it.
;;
;; env.__indirect_function_table is what wasm-ld emits with --import-table.
;; Only functions may be imported from the host.
;;
;; The sandbox should answer: refuse the module before running it (link error).
(module
  (import "env" "__indirect_function_table" (table 1 funcref))
  (memory (export "memory") 1)
  (func (export "_start")))
