var export_8hpp =
[
    [ "export_weights", "export_8hpp.html#ae2c08e06af631610d657ed66ad00c7c1", null ]
];