;; unknown_import.wat - imports a function the sandbox does not provide.
;;
;; The module imports env.foo (a common leftover of C toolchains) besides a
;; valid _start.
;;
;; The sandbox should answer: refuse the module before running anything
;; (link error "env.foo is not provided"); the job fails, the provider is fine.
(module
  (import "env" "foo" (func $foo (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (drop (call $foo (i32.const 42)))))
