-- A capacity sweep (issue 34): the session's steps, knee and capacity at a latency target.

-- JSON as encode.py `to_json` writes a records/capacity.py `Capacity`; NULL for every session
-- that is not a capacity sweep, and for sessions stored before this column existed.
ALTER TABLE sessions ADD COLUMN capacity TEXT;
