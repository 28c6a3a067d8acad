package client

import "testing"

// TestAuditBudgetRefund: an audit given back (its job ended before any
// replica's result) is taken again; the bucket never passes its burst;
// with no cap there is nothing to count.
func TestAuditBudgetRefund(t *testing.T) {
	b := auditBudget{share: 0.1, tokens: 1}
	if !b.take() || b.take() {
		t.Fatal("one token: one audit")
	}
	b.refund()
	if !b.take() {
		t.Error("a refunded audit is not taken again")
	}
	for range 2 * auditBurst {
		b.refund()
	}
	if b.tokens != auditBurst {
		t.Errorf("%g tokens after many refunds, want the burst, %d", b.tokens, auditBurst)
	}
	free := auditBudget{}
	free.refund()
	if free.tokens != 0 || !free.take() {
		t.Errorf("no cap: %g tokens, take %v", free.tokens, free.take())
	}
}
