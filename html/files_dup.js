var files_dup =
[
    [ "policytrain", "dir_46f23ec65d088bfecc84e5f6962c4522.html", "dir_46f23ec65d088bfecc84e5f6962c4522" ]
];