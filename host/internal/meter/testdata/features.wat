;; features.wat exercises everything Instrument has to rewrite or skip:
;; imported and defined functions, element segments in all eight encodings,
;; ref.func in globals and code, the start function, exports of every kind,
;; SIMD, bulk memory, reference types, multi-value blocks and loops with
;; parameters, br_table and select t. Every export returns a value that
;; depends on the right functions being called.
(module
  (type $v (func (result i32)))
  (import "env" "add" (func $host_add (param i32 i32) (result i32)))
  (import "env" "scale" (global $scale i32))

  (table $t0 16 funcref)
  (table $t1 8 funcref)
  (memory (export "mem") 1 2)

  (global $started (mut i32) (i32.const 0))
  (global $fref funcref (ref.func $f3))
  (global (export "scale2") i32 (global.get $scale))

  (func $f1 (type $v) (i32.const 1))
  (func $f2 (type $v) (i32.const 2))
  (func $f3 (type $v) (i32.const 3))
  (func $f4 (type $v) (i32.const 4))
  (func $f5 (type $v) (i32.const 5))
  (func $f6 (type $v) (i32.const 6))
  (func $f7 (type $v) (i32.const 7))
  (func $f8 (type $v) (i32.const 8))

  (elem (i32.const 0) $f1 $f2)                                  ;; flags 0
  (elem $p1 func $f3 $f4)                                       ;; flags 1
  (elem (table $t1) (i32.const 0) func $f5)                     ;; flags 2
  (elem declare func $f6)                                       ;; flags 3
  (elem (i32.const 2) funcref (ref.func $f7) (ref.null func))   ;; flags 4
  (elem $p5 funcref (ref.func $f8) (ref.null func))             ;; flags 5
  (elem (table $t1) (i32.const 2) funcref (ref.func $f1) (ref.null func)) ;; flags 6
  (elem declare funcref (ref.func $f2) (ref.null func))         ;; flags 7

  (data $d "hello, world")
  (data (i32.const 100) "abc")

  (func $start (global.set $started (i32.const 42)))
  (start $start)

  ;; acc*10 + (the i-th table entry's result): a wrong function index shows.
  (func $digit (param $acc i64) (param $table i32) (param $i i32) (result i64)
    (local $r i32)
    (if (i32.eqz (local.get $table))
      (then (local.set $r (call_indirect $t0 (type $v) (local.get $i))))
      (else (local.set $r (call_indirect $t1 (type $v) (local.get $i)))))
    (i64.add (i64.mul (local.get $acc) (i64.const 10)) (i64.extend_i32_u (local.get $r))))

  (func (export "calls") (result i64)
    (local $acc i64)
    (table.init $t0 $p1 (i32.const 4) (i32.const 0) (i32.const 2))
    (table.init $t0 $p5 (i32.const 6) (i32.const 0) (i32.const 1))
    (table.set $t0 (i32.const 7) (global.get $fref))
    (table.set $t0 (i32.const 8) (ref.func $f6))
    (table.copy $t0 $t1 (i32.const 9) (i32.const 2) (i32.const 1))
    (drop (table.grow $t1 (ref.func $f2) (i32.const 2)))
    (table.fill $t0 (i32.const 10) (ref.func $f8) (i32.const 2))
    (elem.drop $p1)
    (local.set $acc (call $digit (local.get $acc) (i32.const 0) (i32.const 0)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 0) (i32.const 1)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 0) (i32.const 2)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 0) (i32.const 4)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 0) (i32.const 5)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 0) (i32.const 6)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 0) (i32.const 7)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 0) (i32.const 8)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 0) (i32.const 9)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 0) (i32.const 11)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 1) (i32.const 0)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 1) (i32.const 2)))
    (local.set $acc (call $digit (local.get $acc) (i32.const 1) (i32.const 9)))
    (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 10))
      (i64.extend_i32_u (i32.add (ref.is_null (table.get $t0 (i32.const 3))) (table.size $t1)))))
    (i64.add (i64.mul (local.get $acc) (i64.const 1000))
      (i64.extend_i32_u (i32.add (global.get $started) (call $host_add (i32.const 100) (i32.const 200))))))

  (func (export "simd") (result i32)
    (local $v v128) (local $i i32) (local $s i32)
    (v128.store (i32.const 16) (v128.const i32x4 1 2 3 4))
    (local.set $v (i32x4.add (v128.load (i32.const 16)) (v128.const i32x4 10 20 30 40)))
    (local.set $v (i8x16.shuffle 12 13 14 15 8 9 10 11 4 5 6 7 0 1 2 3 (local.get $v) (local.get $v)))
    (local.set $v (i32x4.replace_lane 1 (local.get $v) (i32.const 100)))
    (v128.store32_lane 2 (i32.const 32) (local.get $v))
    (local.set $v (v128.load32_lane 0 (i32.const 32) (local.get $v)))
    (local.set $v (i32x4.mul (local.get $v) (v128.load32_splat (i32.const 32))))
    (local.set $v (v128.or (local.get $v) (v128.load64_zero offset=8 align=8 (i32.const 8))))
    (local.set $v (i32x4.add (local.get $v)
      (i32x4.dot_i16x8_s (v128.load16x4_s (i32.const 16)) (i16x8.splat (i32.const 3)))))
    (local.set $v (i32x4.add (local.get $v)
      (i32x4.trunc_sat_f32x4_s (f32x4.sqrt (f32x4.convert_i32x4_u (local.get $v))))))
    (loop $l
      (local.set $v (i32x4.add (local.get $v) (i32x4.splat (local.get $i))))
      (local.set $s (i32.add (local.get $s) (i8x16.extract_lane_u 5 (local.get $v))))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 50))))
    (i32.add (local.get $s)
      (i32.add
        (i32.add (i32x4.extract_lane 0 (local.get $v)) (i32x4.extract_lane 3 (local.get $v)))
        (i32.add (i32x4.bitmask (local.get $v))
          (i32.add (v128.any_true (local.get $v))
            (i32.wrap_i64 (i64x2.extract_lane 1 (i64x2.extmul_low_i32x4_u (local.get $v) (local.get $v)))))))))

  (func (export "bulk") (result i32)
    (local $i i32) (local $s i32)
    (memory.init $d (i32.const 200) (i32.const 0) (i32.const 12))
    (memory.copy (i32.const 300) (i32.const 200) (i32.const 12))
    (memory.fill (i32.const 302) (i32.const 65) (i32.const 3))
    (data.drop $d)
    (loop $l
      (local.set $s (i32.add (i32.mul (local.get $s) (i32.const 31)) (i32.load8_u offset=300 (local.get $i))))
      (br_if $l (i32.ne (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 12))))
    (i32.add (local.get $s)
      (i32.add (i32.load8_s (i32.const 101))
        (i32.add (i32.extend8_s (i32.const 0xff))
          (i32.add (i32.trunc_sat_f32_s (f32.const 1e10)) (memory.grow (i32.const 0)))))))

  (func $swap (param i32 i32) (result i32 i32) (local.get 1) (local.get 0))

  (func $classify (param $x i32) (result i32)
    (block $d (result i32)
      (block $c (result i32)
        (block $b (result i32)
          (block $a (result i32)
            (i32.const 100)
            (br_table $a $b $c $d (local.get $x)))
          (return (i32.add (i32.const 1))))
        (return (i32.add (i32.const 2))))
      (return (i32.add (i32.const 3))))
    (i32.add (i32.const 4)))

  (func (export "multi") (result i32)
    (local $acc i32) (local $t i32)
    (call $swap (i32.const 3) (i32.const 40))
    (block (param i32 i32) (result i32) (i32.sub))
    (local.set $acc)
    (i32.const 10)
    (loop $l (param i32) (result i32)
      (local.set $t (i32.sub (i32.const 1)))
      (local.set $acc (i32.add (local.get $acc) (local.get $t)))
      (br_if $l (local.get $t) (i32.gt_s (local.get $t) (i32.const 0))))
    (drop)
    ;; Loops with results but no parameters get wrapped too.
    (local.set $t (i32.const 0))
    (loop $r (result i32)
      (local.set $t (i32.add (local.get $t) (i32.const 1)))
      (br_if $r (i32.lt_u (local.get $t) (i32.const 20)))
      (local.get $t))
    (loop $r2 (result i32 i32)
      (local.set $t (i32.add (local.get $t) (i32.const 3)))
      (br_if $r2 (i32.lt_u (local.get $t) (i32.const 50)))
      (local.get $t) (i32.const 1000))
    (local.set $acc (i32.add (local.get $acc) (i32.add (i32.add) (i32.mul (i32.const 7)))))
    (local.set $acc (i32.add (local.get $acc)
      (i32.add (call $classify (i32.const 0))
        (i32.add (call $classify (i32.const 2)) (call $classify (i32.const 7))))))
    (if (result i32 i32) (i32.const 1)
      (then (i32.const 5) (i32.const 6))
      (else (unreachable)))
    (i32.mul)
    (local.get $acc)
    (select (result i32) (i32.add) (i32.const 0) (i32.const 1)))

  (func (export "imported") (result i32)
    (call $host_add (global.get $scale) (i32.const 2)))
)
