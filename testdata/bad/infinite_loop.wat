;; infinite_loop.wat - the smallest infinite loop: loop br 0.
;;
;; It makes no calls, touches no memory and never yields.
;;
;; The sandbox should answer: stop it at the job's time (or fuel) limit and
;; report a timeout; the provider is fine.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $forever
      (br $forever))))
