-- When each token was last used over HTTP, written at most once a minute
-- per token (mailroom.TokenTouchInterval). `mailroom token list` shows it.
ALTER TABLE token ADD COLUMN last_used_at timestamptz;
