-- The demo's inspector: plain SQL in Debian's sqlite3 shell, with the honker
-- extension loaded (scripts/demo.sh passes .load first).
.mode list
SELECT '[inspector] orders in the shop:               ' || count(*) FROM orders;
SELECT '[inspector] orders for mallory (rolled back): ' || count(*) FROM orders WHERE email LIKE 'mallory%';
SELECT '[inspector] email jobs ever created:          '
       || coalesce((SELECT seq FROM sqlite_sequence WHERE name = '_honker_jobs'), 0)
       || '  (one per committed order: mallory''s rolled back with her order)';
SELECT '[inspector] queue stats: ' || honker_queue_stats('emails');
