<?php
// board.php - php-fpm's peer of examples/board (make bench): messages as
// files N.msg (author, subject, text on lines) in BOARD_DIR, read in
// batches of ten with PHP's session remembering the last one read; posted
// with action=post author subject text.  The same page markup as the
// servlet, everything from the client escaped or parsed as a number.
$dir = $_SERVER['BOARD_DIR'] ?? (__DIR__ . '/board');
session_start();
function ids($dir) {
    $ids = [];
    foreach (scandir($dir) as $f)
        if (preg_match('/^([1-9][0-9]{0,11})\.msg$/', $f, $m)) $ids[] = (int)$m[1];
    sort($ids, SORT_NUMERIC);
    return $ids;
}
$action = $_REQUEST['action'] ?? '';
if ($_SERVER['REQUEST_METHOD'] === 'POST' && $action === 'post') {
    $ids = ids($dir);
    $id = $ids ? end($ids) + 1 : 1;
    $text = substr($_POST['author'] ?? '', 0, 64) . "\n" . substr($_POST['subject'] ?? '', 0, 120)
        . "\n" . substr($_POST['text'] ?? '', 0, 4000);
    if (file_put_contents("$dir/$id.msg", $text, LOCK_EX) === false) {
        http_response_code(500);
        exit("cannot store the message\n");
    }
    http_response_code(201);
    header("Location: /board?action=show&id=$id");
    exit("created $id\n");
}
if ($action !== 'read') {
    http_response_code(400);
    exit("unknown action\n");
}
$last = isset($_GET['from']) ? (int)$_GET['from'] : (int)($_SESSION['last'] ?? 0);
header('Content-Type: text/html; charset=utf-8');
echo "<!DOCTYPE html>\n<html><head><title>Messages</title></head><body>\n<h1>Messages</h1>\n";
$shown = 0;
foreach (ids($dir) as $id) {
    if ($id <= $last || $shown >= 10) continue;
    $raw = @file_get_contents("$dir/$id.msg");
    if ($raw === false) continue;
    $parts = explode("\n", $raw, 3);
    if (count($parts) < 3) continue;
    [$author, $subject, $text] = $parts;
    printf("<div class=\"msg\" id=\"m%d\"><h2>#%d %s</h2><p>by %s</p><pre>%s</pre>"
        . "<form method=\"post\" action=\"/board\"><input type=\"hidden\" name=\"action\" value=\"delete\">"
        . "<input type=\"hidden\" name=\"id\" value=\"%d\"><button>Delete</button></form></div>\n",
        $id, $id, htmlspecialchars($subject), htmlspecialchars($author), htmlspecialchars($text), $id);
    $last = $id;
    $shown++;
}
if (!$shown) echo "<p>No new messages.</p>\n";
$_SESSION['last'] = $last;
echo "<p class=\"count\">$shown shown</p>\n</body></html>\n";
