var functions_func =
[
    [ "a", "functions_func.html", null ],
    [ "b", "functions_func_b.html", null ],
    [ "c", "functions_func_c.html", null ],
    [ "d", "functions_func_d.html", null ],
    [ "e", "functions_func_e.html", null ],
    [ "f", "functions_func_f.html", null ],
    [ "g", "functions_func_g.html", null ],
    [ "h", "functions_func_h.html", null ],
    [ "i", "functions_func_i.html", null ],
    [ "k", "functions_func_k.html", null ],
    [ "l", "functions_func_l.html", null ],
    [ "m", "functions_func_m.html", null ],
    [ "n", "functions_func_n.html", null ],
    [ "o", "functions_func_o.html", null ],
    [ "p", "functions_func_p.html", null ],
    [ "r", "functions_func_r.html", null ],
    [ "s", "functions_func_s.html", null ],
    [ "t", "functions_func_t.html", null ],
    [ "u", "functions_func_u.html", null ],
    [ "w", "functions_func_w.html", null ],
    [ "~", "functions_func_~.html", null ]
];