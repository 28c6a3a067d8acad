;; import_memory.wat - imports its linear memory instead of defining it.
;;
;; env.memory is what wasm-ld emits with --import-memory. Only functions may
;; be imported from the host; the sandbox gives no memory to share.
;;
;; The sandbox should answer: refuse the module before running it (link error).
(module
  (import "env" "memory" (memory 1))
  (func (export "_start")))
