;; threads.wat exercises the atomics opcodes (0xFE prefix) on shared memory.
(module
  (memory 1 1 shared)
  (func (export "atomics") (result i64)
    (local $i i32)
    (loop $l
      (drop (i32.atomic.rmw.add (i32.const 0) (local.get $i)))
      (drop (i64.atomic.rmw8.xor_u offset=8 (i32.const 0) (i64.extend_i32_u (local.get $i))))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 100))))
    (atomic.fence)
    (drop (i32.atomic.rmw.cmpxchg (i32.const 0) (i32.const 4950) (i32.const 7)))
    (i32.atomic.store16 (i32.const 16) (i32.const 0x1234))
    (i64.add
      (i64.extend_i32_u
        (i32.add (memory.atomic.notify (i32.const 0) (i32.const 1))
          (i32.add (i32.atomic.load (i32.const 0)) (i32.atomic.load16_u (i32.const 16)))))
      (i64.atomic.load offset=8 (i32.const 0))))
)
