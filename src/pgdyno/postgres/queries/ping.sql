-- Whether the session still answers.
SELECT 1 AS one
