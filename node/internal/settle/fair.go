package settle

import (
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/proofs/fair"
)

// OpenBought finishes a fair exchange that this node paid for but did not
// open (it stopped in between): the key the payment revealed opens the
// offer kept with the payment, and the job record gets the output. The
// payment was made after the verdict, which the record keeps.
func (l *Ledger) OpenBought(pay *store.Payment, key [32]byte) error {
	if l.fair == nil || pay.Offer == nil {
		return nil
	}
	o, err := fair.DecodeOffer(pay.Offer)
	if err != nil {
		return err
	}
	out, err := l.fair.Template.Open(o, key)
	if err != nil {
		return err
	}
	d, err := l.blobs.PutBytes(out)
	if err != nil {
		return err
	}
	job, err := l.db.Job(pay.Job)
	if err != nil || !job.Output.IsZero() {
		return err // opened already
	}
	job.Output, job.OutputSize, job.Error = d, int64(len(out)), ""
	job.State = store.JobUnverified
	if job.Verification != "" {
		job.State = store.JobVerified
	}
	l.log.Info("fair exchange: output opened after a restart", "job", pay.Job, "output", d.Short())
	return l.db.PutJob(job)
}
