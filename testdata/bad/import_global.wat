;; import_global.wat - imports a mutable global.
;;
;; env.__stack_pointer is what wasm-ld emits for position-independent code.
;; Only functions may be imported from the host.
;;
;; The sandbox should answer: refuse the module before running it (link error).
(module
  (import "env" "__stack_pointer" (global $sp (mut i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (global.set $sp (i32.const 0))))
