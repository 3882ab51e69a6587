-- The server's clock now (not the transaction's start): the moment a reload was asked for.
SELECT clock_timestamp() AS now
