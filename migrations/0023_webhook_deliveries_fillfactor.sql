-- Room on each page of webhook_deliveries for the claim's new row version (sql/webhook-deliveries.ts):
-- the claim sets only lease_until, which no index holds since 0022, so with free space on the row's
-- own page it is a HOT update (no index entry written, the old version pruned in place). Rows are
-- claimed soon after the outbox trigger inserts them, but behind a backlog their pages are full
-- by then; 20 % kept free made nearly every claim HOT in a backlogged test (about 3 in 4 at 100).
-- Applies to pages written from now on.
ALTER TABLE "webhook_deliveries" SET (fillfactor = 80);
