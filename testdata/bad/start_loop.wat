;; start_loop.wat - an infinite loop in the start function.
;;
;; A module's start function (the start section, not the WASI _start export)
;; runs while the module is being instantiated, before the sandbox calls
;; _start. A sandbox whose time limit only covers the _start call hangs here.
;;
;; The sandbox should answer: stop it at the job's time limit and report a
;; timeout, exactly as for infinite_loop.wat.
(module
  (memory (export "memory") 1)
  (func $init
    (loop $forever
      (br $forever)))
  (start $init)
  (func (export "_start")))
