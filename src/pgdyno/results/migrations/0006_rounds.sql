-- How a comparison's rounds went (issue 13): fixed or adaptive, the order of the sets in each
-- round, their duration, and why they stopped (JSON; NULL for comparisons made before).
ALTER TABLE comparisons ADD COLUMN rounds TEXT;
