#!/usr/bin/python3
"""The status page in a real browser (Debian's headless Chromium through chromedriver/Selenium).

    status_page.py URL TOKEN SINK OUT_DIR [DEAD_SINK DEAD_COUNT REASON]

Loads URL/#token=TOKEN, waits until SINK's row shows state "error", takes a screenshot, presses
its restart button, waits until the row shows "running" again with its lag chart drawn, and takes
a second screenshot. With DEAD_SINK: waits until that sink's dead-letter row counts DEAD_COUNT
dead letters, one of its reasons reading REASON and its newest listed, and takes a third; then
presses its "redrive all" button, accepts the confirmation, waits until the redrive is done (the
records still bad: each "bad again") and takes a fourth.
Exits 0 when all of that happened; prints what was seen otherwise.
"""
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

url, token, sink, out = sys.argv[1:5]
dead_sink, dead_count, dead_reason = (sys.argv[5:8] + [None, None, None])[:3]
opts = webdriver.ChromeOptions()
for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,500",
          "--user-data-dir=" + out + "/chromium-profile"):
    opts.add_argument(a)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
try:
    driver.get(url + "/#token=" + token)

    def row_state(timeout, want):
        deadline = time.time() + timeout
        seen = None
        while time.time() < deadline:
            rows = driver.find_elements(By.ID, "sink-" + sink)
            if rows:
                seen = rows[0].get_attribute("data-state")
                if seen == want:
                    return rows[0]
            time.sleep(0.2)
        sys.exit(f"row of sink {sink!r}: state {seen!r}, expected {want!r}; page: {driver.page_source[:2000]}")

    row = row_state(30, "error")
    err = row.find_element(By.CLASS_NAME, "err").text
    if not err:
        sys.exit("a sink in error shows no error message")
    driver.save_screenshot(out + "/status-error.png")
    row.find_element(By.CSS_SELECTOR, "button[data-a=restart]").click()
    row = row_state(60, "running")
    time.sleep(2.5)  # one more refresh: the charts have two samples
    if row.find_element(By.CLASS_NAME, "err").text:
        sys.exit("the error message is still shown after the restart")
    driver.save_screenshot(out + "/status-running.png")
    if dead_sink:
        deadline, seen = time.time() + 60, None
        while time.time() < deadline:
            rows = driver.find_elements(By.ID, "dead-" + dead_sink)
            if rows:
                seen = rows[0].text
                letters = rows[0].find_elements(By.CLASS_NAME, "letter")
                if rows[0].get_attribute("data-count") == dead_count and dead_reason in seen and letters:
                    break
            time.sleep(0.5)
        else:
            sys.exit(f"dead letters of {dead_sink!r}: expected {dead_count} with {dead_reason!r}, saw {seen!r}")
        driver.save_screenshot(out + "/status-dead-letters.png")
        rows[0].find_element(By.CSS_SELECTOR, "button.redrive").click()
        driver.switch_to.alert.accept()
        deadline, seen = time.time() + 60, None
        while time.time() < deadline:
            seen = driver.find_element(By.CSS_SELECTOR, "#dead-" + dead_sink + " .redrive-state").text
            if " done: 0 written, " + dead_count + " bad again" in seen:
                break
            time.sleep(0.5)
        else:
            sys.exit(f"redrive of {dead_sink!r}: expected done with {dead_count} bad again, saw {seen!r}")
        driver.save_screenshot(out + "/status-redrive.png")
    print("ok:", driver.find_element(By.ID, "msg").text)
finally:
    driver.quit()
