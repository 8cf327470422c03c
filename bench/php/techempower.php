<?php
// techempower.php - TechEmpower's database tests for php-fpm (bench/db):
// /db, /queries, /fortunes and /updates (nginx passes the route in
// TE_ROUTE), the same answers as examples/techempower/techempower.c.
// PDO pgsql with a persistent connection per php-fpm worker, as
// TechEmpower's PHP entries use, and server-side prepared statements
// (emulation off).  The connection string comes from nginx (TE_DSN).  It
// must never cache rows between requests.

$pdo = new PDO($_SERVER['TE_DSN'], null, null, [
    PDO::ATTR_PERSISTENT => true,
    PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
    PDO::ATTR_EMULATE_PREPARES => false,
]);

// 1..500; missing or not a number counts as 1.
function te_queries(): int
{
    $q = $_GET['queries'] ?? '';
    if (!is_string($q) || !ctype_digit($q)) {
        return 1;
    }
    $n = (int) $q;
    return $n < 1 ? 1 : min($n, 500);
}

function te_worlds(PDO $pdo, int $n): array
{
    $st = $pdo->prepare('SELECT id, randomNumber FROM World WHERE id = ?');
    $rows = [];
    for ($i = 0; $i < $n; $i++) {
        $st->execute([mt_rand(1, 10000)]);
        $r = $st->fetch(PDO::FETCH_NUM);
        $rows[] = ['id' => (int) $r[0], 'randomNumber' => (int) $r[1]];
    }
    return $rows;
}

switch ($_SERVER['TE_ROUTE'] ?? '') {
case 'db':
    header('Content-Type: application/json');
    echo json_encode(te_worlds($pdo, 1)[0]);
    break;
case 'queries':
    header('Content-Type: application/json');
    echo json_encode(te_worlds($pdo, te_queries()));
    break;
case 'updates':
    $rows = te_worlds($pdo, te_queries());
    $byId = [];
    foreach ($rows as $i => $r) {
        $rows[$i]['randomNumber'] = $byId[$r['id']] ??= mt_rand(1, 10000);
    }
    ksort($byId);
    $st = $pdo->prepare('UPDATE World SET randomNumber = u.r FROM unnest(?::int[], ?::int[]) '
        . 'AS u(id, r) WHERE World.id = u.id');
    $st->execute(['{' . implode(',', array_keys($byId)) . '}', '{' . implode(',', $byId) . '}']);
    header('Content-Type: application/json');
    echo json_encode($rows);
    break;
case 'fortunes':
    $st = $pdo->prepare('SELECT id, message FROM Fortune');
    $st->execute();
    $list = $st->fetchAll(PDO::FETCH_KEY_PAIR);
    $list[0] = 'Additional fortune added at request time.';
    asort($list, SORT_STRING);
    header('Content-Type: text/html; charset=utf-8');
    echo '<!DOCTYPE html><html><head><title>Fortunes</title></head><body>'
        . '<table><tr><th>id</th><th>message</th></tr>';
    foreach ($list as $id => $message) {
        echo '<tr><td>', $id, '</td><td>', htmlspecialchars($message, ENT_QUOTES, 'UTF-8'),
            '</td></tr>';
    }
    echo '</table></body></html>';
    break;
default:
    http_response_code(404);
}
