-- create.sql - TechEmpower's World and Fortune tables for
-- examples/techempower (techempower.so) and make bench (bench/db).
--
--     psql -v ON_ERROR_STOP=1 -d DBNAME -f examples/techempower/create.sql
--
-- Drops and recreates both tables: World's 10000 rows get random numbers
-- in 1..10000, Fortune gets the tests' 12 standard messages (one of them
-- markup that a page must escape, one in Japanese).  Run it as a role that
-- may create tables; the role in sandlet.conf's "database" string needs
-- SELECT on both and UPDATE on World (see the GRANT at the end).

SET client_min_messages = warning;

BEGIN;

DROP TABLE IF EXISTS World;
CREATE TABLE World (
    id integer NOT NULL PRIMARY KEY,
    randomNumber integer NOT NULL DEFAULT 0
);
INSERT INTO World (id, randomNumber)
SELECT n, 1 + floor(random() * 10000)::integer FROM generate_series(1, 10000) AS n;

DROP TABLE IF EXISTS Fortune;
CREATE TABLE Fortune (
    id integer NOT NULL PRIMARY KEY,
    message varchar(2048) NOT NULL
);
INSERT INTO Fortune (id, message) VALUES
    (1, 'fortune: No such file or directory'),
    (2, 'A computer scientist is someone who fixes things that aren''t broken.'),
    (3, 'After enough decimal places, nobody gives a damn.'),
    (4, 'A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1'),
    (5, 'A computer program does what you tell it to do, not what you want it to do.'),
    (6, 'Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen'),
    (7, 'Any program that runs right is obsolete.'),
    (8, 'A list is only as strong as its weakest link. — Donald Knuth'),
    (9, 'Feature: A bug with seniority.'),
    (10, 'Computers make very fast, very accurate mistakes.'),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, 'フレームワークのベンチマーク');

-- The servlet's role, when it is not the owner: uncomment and name it.
-- GRANT SELECT, UPDATE ON World TO webapp;
-- GRANT SELECT ON Fortune TO webapp;

COMMIT;

ANALYZE World;
ANALYZE Fortune;
