/// Truncate into a hole (a purge past the end), reopen direct after buffered, append, check & salvage.
#[test]
fn truncate_into_hole_then_salvage() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("log");
    ringkit::Runtime::new().unwrap().block_on(async {
        let log = Log::open(&dir, opts(false)).await.unwrap();
        for i in 1..=10u64 {
            assert_eq!(log.append(format!("a{i}")).await.unwrap(), i);
        }
        assert_eq!(log.purge(30).await.unwrap(), 30); // hole 11..30, first 30
        for i in 30..=40u64 {
            assert_eq!(log.append(format!("b{i}")).await.unwrap(), i);
        }
        drop(log);
        let log = Log::open(&dir, opts(true)).await.unwrap();
        let r = log.truncate(35).await;
        println!(
            "truncate(35) after reopen direct: {r:?}; next {}",
            log.next_lsn()
        );
        for i in 35..=37u64 {
            assert_eq!(log.append(format!("c{i}")).await.unwrap(), i);
        }
        let r = log.truncate(29).await;
        println!(
            "truncate(29) (before first_lsn 30): {:?}",
            r.map_err(|e| e.kind())
        );
        drop(log);
        let rep = ringkit_log::check(&dir).await.unwrap();
        println!("check: records {} error {:?}", rep.records, rep.error);
        let into = t.path().join("salv");
        let s = ringkit_log::salvage(&dir, &into, opts(false), None)
            .await
            .unwrap();
        let out = Log::open(&into, opts(false)).await.unwrap();
        let recs = out.read_from(30, 100).await.unwrap();
        let v: Vec<String> = recs
            .iter()
            .map(|(l, p)| format!("{l}:{}", String::from_utf8_lossy(p)))
            .collect();
        println!(
            "salvage copied {} first {} next {}: {:?}",
            s.copied, s.first, s.next, v
        );
        assert_eq!(
            v,
            ["30:b30", "31:b31", "32:b32", "33:b33", "34:b34", "35:c35", "36:c36", "37:c37"]
        );
    });
}
