;; future_import.wat - imports a function of the infernet host module that
;; this host does not have: one of an ABI later than the host's.
;;
;; The sandbox should answer: refuse the module before running anything
;; with ErrHostTooOld, not ErrImportNotAllowed: a newer host runs it, so
;; the failure is this provider's limit, not the job's fault (its replicas
;; on newer providers would otherwise outvote a true "stopped").
(module
  (import "infernet" "a_function_of_a_later_abi" (func $later (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (drop (call $later (i32.const 42)))))
