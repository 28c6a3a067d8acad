;; fuel.wat holds guests with known fuel costs and runaway guests that only
;; metering can stop.
(module
  (type $fn (func (param i32)))
  (table 1 funcref)
  (elem (i32.const 0) $fan_indirect)

  ;; spin never returns.
  (func (export "spin") (loop $l (br $l)))

  ;; spin_params never returns either, from a loop with a parameter.
  (func (export "spin_params")
    (i32.const 0)
    (loop $l (param i32) (br $l (i32.add (i32.const 1)))))

  ;; fan_indirect makes 2^n calls through a table.
  (func $fan_indirect (export "fan_indirect") (param $n i32)
    (if (local.get $n)
      (then
        (call_indirect (type $fn) (i32.sub (local.get $n) (i32.const 1)) (i32.const 0))
        (call_indirect (type $fn) (i32.sub (local.get $n) (i32.const 1)) (i32.const 0)))))

  ;; fan makes 2^n calls without a single loop.
  (func $fan (export "fan") (param $n i32)
    (if (local.get $n)
      (then
        (call $fan (i32.sub (local.get $n) (i32.const 1)))
        (call $fan (i32.sub (local.get $n) (i32.const 1))))))

  ;; count costs 2 (loop, end) + 7 per iteration, for n >= 1.
  (func (export "count") (param $n i32)
    (loop $l
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n))))

  ;; straight costs 4: i32.const, i32.const, i32.add, end.
  (func (export "straight") (result i32)
    (i32.add (i32.const 1) (i32.const 2)))

  ;; nested costs 2 + n*(9 + m*6): loops pay for their own bodies only.
  (func (export "nested") (param $n i32) (param $m i32)
    (local $j i32)
    (loop $outer
      (local.set $j (local.get $m))
      (loop $inner
        (br_if $inner (local.tee $j (i32.sub (local.get $j) (i32.const 1)))))
      (br_if $outer (local.tee $n (i32.sub (local.get $n) (i32.const 1))))))
)
